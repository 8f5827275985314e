"""Gradients of @tessera.jit functions: tessera.grad and tessera.value_and_grad.

The gradient is built by the core as a new execution tree (reverse mode), from
the same expression-language program the jit produces: Python only names the
function and the arguments.

    @tessera.jit
    def loss(w, x, y):
        return np.mean((x @ w - y) ** 2)

    dw = tessera.grad(loss)(w, x, y)                 # d loss / d w
    value, (dw, dx) = tessera.value_and_grad(loss, argnums=(0, 1))(w, x, y)
    d2 = tessera.grad(tessera.grad(f))(x)            # a second derivative
"""

from __future__ import annotations

import threading

from .jit import JitFunction, _arg_key, _core, jit


class GradFunction:
    """The gradient (or value and gradient) of a jit function."""

    form = None  # "vjp" for VjpFunction

    def __init__(self, f, argnums=0, with_value=False):
        # grad(grad(f)): the inner gradient is a function of f's arguments too,
        # differentiated in turn (a second-order gradient).
        self.inner = f if isinstance(f, GradFunction) and f.form is None else None
        if self.inner is not None:
            f = self.inner.function
        if not isinstance(f, JitFunction):
            f = jit(f)
        self.function = f
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        if not self.argnums or not all(isinstance(a, int) for a in self.argnums):
            raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
        self.with_value = with_value
        self._programs: dict = {}
        self._lock = threading.Lock()
        name = "value_and_grad" if with_value else "grad"
        inner = self.inner.__name__ if self.inner is not None else f.__name__
        self.__name__ = f"{name}({inner})"

    def form_text(self, entry: str) -> str:
        """The language's gradient form of the function named `entry`
        (grad(f, argnums=0); nested for a gradient of a gradient)."""
        if self.inner is not None:
            entry = self.inner.form_text(entry)
        form = self.form or ("value_and_grad" if self.with_value else "grad")
        nums = str(self.argnums[0]) if self.single else "[" + ", ".join(map(str, self.argnums)) + "]"
        aux = ", has_aux=true" if getattr(self, "has_aux", False) else ""
        return f"{form}({entry}, argnums={nums}{aux})"

    @property
    def code(self) -> str:
        """The program text: the function followed by the gradient form."""
        tr = self.function._translate()
        text = tr.text.rstrip()
        head, entry = text.rsplit("\n", 1)
        return f"{head}\n{self.form_text(entry.strip())}\n"

    def __call__(self, *args):
        f = self.function
        if len(args) != f._n_params:
            raise TypeError(f"{self.__name__}: expected {f._n_params} arguments, got {len(args)}")
        for a in self.argnums:
            if not -f._n_params <= a < f._n_params:
                raise ValueError(
                    f"{self.__name__}: argnums {a} is out of range for {f._n_params} arguments"
                )
        key = tuple(map(_arg_key, args))
        prog = self._programs.get(key)
        if prog is None:
            with self._lock:
                prog = self._programs.get(key)
                if prog is None:
                    prog = _core().Program(self.code, f"<grad {f.__name__}>")
                    self._programs[key] = prog
        tr = f._translate()
        result = prog.run(list(args) + list(tr.constants))
        if self.form == "vjp":
            return self._split(result)
        return self.python_result(result)

    def python_result(self, result):
        """The run's list as Python's tuples, for this form and the ones inside it."""
        if self.with_value:
            value, grads = result
            if self.inner is not None:
                value = self.inner.python_result(value)
            return value, grads if self.single else tuple(grads)
        return result if self.single else tuple(result)


def grad(f, argnums=0):
    """The gradient of scalar-valued `f` (a function or @tessera.jit function)
    with respect to argument `argnums` (an int, or a tuple for a tuple of
    gradients). Straight-line code, calls and if/else are differentiated;
    loops raise CompileError naming the construct and the line. It may be
    called inside a jit function that is differentiated in turn, and nested:
    grad(grad(f)) (second-order gradients, docs/python.md)."""
    return GradFunction(f, argnums, with_value=False)


def value_and_grad(f, argnums=0):
    """Like grad, returning (value, gradient)."""
    return GradFunction(f, argnums, with_value=True)


class VjpFunction(GradFunction):
    """The forward/backward split of a jit function's gradient (see vjp)."""

    form = "vjp"

    def __init__(self, f, argnums=0, has_aux=False):
        super().__init__(f, argnums, with_value=True)
        self.has_aux = bool(has_aux)
        self.__name__ = f"vjp({self.function.__name__})"

    def _split(self, result):
        value, pull = result[0], result[1]
        single = self.single

        def pullback(ct):
            """The gradients of sum(value * ct), running only the backward pass."""
            grads = pull(ct)
            return grads if single else tuple(grads)

        return (value, pullback, result[2]) if self.has_aux else (value, pullback)


def vjp(f, argnums=0, has_aux=False):
    """The forward/backward split of f's gradient: ``vjp(f)(*args)`` runs f's forward only
    and returns ``(value, pullback)`` (with has_aux, f returns ``(value, aux)`` and the result is
    ``(value, pullback, aux)``). ``pullback(ct)`` runs only the backward, from the intermediates
    the forward kept, and returns the gradients of ``sum(value * ct)`` with respect to argnums
    (a tuple, or one array for an int); ct has value's shape and dtype (a number fills it).
    It may be called again or never."""
    return VjpFunction(f, argnums, has_aux)


def checkpoint(f):
    """Activation checkpointing: ``tessera.checkpoint(f)(*args)`` is ``f(*args)``; inside a
    function that tessera differentiates (grad, value_and_grad, vjp), the call keeps none of f's
    intermediates for the backward pass, only its arguments, and the backward recomputes f's
    forward from them (the same gradients, bit for bit). In a @tessera.jit function it is the
    language's ``checkpoint`` primitive; called eagerly it returns f."""
    return f


checkpoint._tessera_primitive = "checkpoint"


def remat(f):
    """Rematerialisation: ``tessera.remat(f)(*args)`` is ``f(*args)``; inside a function that
    tessera differentiates (grad, value_and_grad, vjp), the value f returns, and the views of it
    that indexing, reshape, ravel and transpose make, are not kept for the backward pass: the
    backward recomputes them just before it first needs them (the same gradients, bit for bit).
    Unlike ``checkpoint``, f's own intermediates are kept as usual: use it for a value that is
    cheap to make again and large (ZeRO-3's gathered weights). In a @tessera.jit function it is
    the language's ``remat`` primitive; called eagerly it returns f."""
    return f


remat._tessera_primitive = "remat"

"""Gradients of @tessera.jit functions: tessera.grad and tessera.value_and_grad.

The gradient is built by the core as a new execution tree (reverse mode), from
the same expression-language program the jit produces: Python only names the
function and the arguments.

    @tessera.jit
    def loss(w, x, y):
        return np.mean((x @ w - y) ** 2)

    dw = tessera.grad(loss)(w, x, y)                 # d loss / d w
    value, (dw, dx) = tessera.value_and_grad(loss, argnums=(0, 1))(w, x, y)
"""

from __future__ import annotations

import threading

from .jit import JitFunction, _arg_key, _core, jit


class GradFunction:
    """The gradient (or value and gradient) of a jit function."""

    def __init__(self, f, argnums=0, with_value=False):
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
        self.__name__ = f"{name}({f.__name__})"

    @property
    def code(self) -> str:
        """The program text: the function followed by the gradient form."""
        tr = self.function._translate()
        text = tr.text.rstrip()
        head, entry = text.rsplit("\n", 1)
        form = "value_and_grad" if self.with_value else "grad"
        nums = str(self.argnums[0]) if self.single else "[" + ", ".join(map(str, self.argnums)) + "]"
        return f"{head}\n{form}({entry.strip()}, argnums={nums})\n"

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
        if self.with_value:
            value, grads = result
            return value, grads if self.single else tuple(grads)
        return result if self.single else tuple(result)


def grad(f, argnums=0):
    """The gradient of scalar-valued `f` (a function or @tessera.jit function)
    with respect to argument `argnums` (an int, or a tuple for a tuple of
    gradients). Straight-line code, calls and if/else are differentiated;
    loops raise CompileError naming the construct and the line."""
    return GradFunction(f, argnums, with_value=False)


def value_and_grad(f, argnums=0):
    """Like grad, returning (value, gradient)."""
    return GradFunction(f, argnums, with_value=True)

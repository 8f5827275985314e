"""keras.distillation: a Distiller model that trains a student from a frozen
teacher, and the losses that compare them (Keras 3.15's classes, arguments and
defaults).

The Distiller is a Model whose `call` is the student's; its `compute_loss`
(the student's supervised loss and the weighted distillation losses) is traced
into fit's and evaluate's compiled step like a user's override
(step_overrides.py), the teacher's layers joining the model's weights, frozen.
FeatureDistillation reads intermediate layers through functional models over
the teacher's and the student's graphs, built once, called in the step.
"""

from __future__ import annotations

from . import losses as _losses
from . import metrics as _metrics
from . import ops
from .model import Model, Sequential
from .registry import register_builtin
from .symbolic import user_location

__all__ = ["DistillationLoss", "LogitsDistillation", "FeatureDistillation", "Distiller"]

_FINAL = "final_output"


def _as_loss(item, owner: str):
    """A loss given by name (keras.losses.get: a function, or a class's
    object), a Loss or function as it is, None as None."""
    if item is None or (callable(item) and not isinstance(item, (str, type))):
        return item
    if isinstance(item, dict) and item.get("class_name") == "function":  # Keras's serialized
        item = item.get("config")
    if isinstance(item, (str, dict)):
        try:
            return _losses.get(item)
        except (ValueError, TypeError) as e:
            raise ValueError(f"[{owner}] unknown loss {item!r}: {e}") from None
    raise TypeError(f"[{owner}] a loss must be a name, a tessera.nn.losses object or function, "
                    f"or None, got {item!r} (at {user_location()})")


def _as_losses(loss, owner: str):
    """One loss, or a list of them (one per output)."""
    if isinstance(loss, (list, tuple)):
        out = [_as_loss(l, owner) for l in loss]
    else:
        out = _as_loss(loss, owner)
    if all(l is None for l in (out if isinstance(out, list) else [out])):
        raise ValueError(f"[{owner}] the loss must contain at least one non-None value, got "
                         f"{loss!r} (at {user_location()})")
    return out


def _loss_config(loss):
    """A loss as get_config gives it: a function by its name, a Loss object
    (saved through its own get_config), a list of them."""
    if isinstance(loss, list):
        return [_loss_config(l) for l in loss]
    if loss is None or isinstance(loss, _losses.Loss):
        return loss
    name = getattr(loss, "__name__", None)
    if getattr(loss, "_tessera_loss", None) is not None:
        return name
    return loss  # a user's registered function: saving names it


def _per_output(values, what: str, owner: str) -> list:
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _structure_check(loss, teacher, student, owner: str):
    """Teacher and student outputs of one structure, and one loss per output."""
    t, s = _per_output(teacher, "", owner), _per_output(student, "", owner)
    if len(t) != len(s) or isinstance(teacher, (list, tuple)) != isinstance(student,
                                                                              (list, tuple)):
        raise ValueError(f"[{owner}] the teacher's and the student's outputs differ in "
                         f"structure: {len(t)} and {len(s)} values")
    if isinstance(loss, list) and len(loss) != len(t):
        raise ValueError(f"[{owner}] {len(loss)} losses for {len(t)} outputs (the loss's "
                         "structure must be the outputs')")
    if not isinstance(loss, list) and isinstance(teacher, (list, tuple)):
        raise ValueError(f"[{owner}] one loss for {len(t)} outputs: give a list of losses, "
                         "one per output (None to skip one)")


class DistillationLoss:
    """keras.distillation.DistillationLoss: the base of the losses comparing
    the teacher's outputs (or features) with the student's. A subclass
    implements compute_loss(teacher_outputs, student_outputs) -> a scalar,
    with keras.ops (it is traced into the training step)."""

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        raise NotImplementedError(f"[{type(self).__name__}] subclasses of DistillationLoss "
                                  "must implement compute_loss")

    def validate_outputs(self, teacher_outputs, student_outputs):
        """The teacher's and the student's outputs have one structure."""
        t = _per_output(teacher_outputs, "", type(self).__name__)
        s = _per_output(student_outputs, "", type(self).__name__)
        if len(t) != len(s):
            raise ValueError(f"[{type(self).__name__}] the teacher's and the student's outputs "
                             f"differ in structure: {len(t)} and {len(s)} values")

    def validate_model_compatibility(self, teacher, student):
        """Checks the models suit this loss (the base: any do)."""

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _apply(loss, teacher, student, one, owner: str):
    """Sum over the outputs of one(loss_fn, t, s) (0 where the loss is None)."""
    _structure_check(loss, teacher, student, owner)
    ts, ss = _per_output(teacher, "", ""), _per_output(student, "", "")
    fns = loss if isinstance(loss, list) else [loss]
    total = None
    for fn, t, s in zip(fns, ts, ss):
        if fn is None:
            continue
        v = one(fn, t, s)
        total = v if total is None else total + v
    return total


class FeatureDistillation(DistillationLoss):
    """keras.distillation.FeatureDistillation: the loss (default "mse")
    between the teacher's and the student's features: the outputs of the
    layers named teacher_layer_name and student_layer_name (functional or
    Sequential models), or the final outputs when None. Each output's loss
    is averaged, the outputs' summed."""

    def __init__(self, loss="mse", teacher_layer_name=None, student_layer_name=None):
        for what, v in (("teacher_layer_name", teacher_layer_name),
                        ("student_layer_name", student_layer_name)):
            if v is not None and not isinstance(v, str):
                raise TypeError(f"[FeatureDistillation] {what} must be a layer's name or None, "
                                f"got {v!r} (at {user_location()})")
        self.teacher_layer_name = teacher_layer_name
        self.student_layer_name = student_layer_name
        self.loss = _as_losses(loss, "FeatureDistillation")

    def validate_model_compatibility(self, teacher, student):
        if self.teacher_layer_name is None and self.student_layer_name is None:
            return
        sub = [w for w, m in (("teacher", teacher), ("student", student)) if not _has_graph(m)]
        if sub:
            raise ValueError(
                f"[FeatureDistillation] layer names need functional or Sequential models; the "
                f"{' and '.join(sub)} model(s) are subclassed (no symbolic inputs and outputs): "
                "use functional or Sequential models, FeatureDistillation without layer names "
                "(final outputs), or LogitsDistillation")
        for what, model, name in (("teacher", teacher, self.teacher_layer_name),
                                  ("student", student, self.student_layer_name)):
            if name is not None:
                try:
                    model.get_layer(name=name)
                except ValueError as e:
                    raise ValueError(f"[FeatureDistillation] in the {what} model: {e}") \
                        from None

    def validate_outputs(self, teacher_outputs, student_outputs):
        super().validate_outputs(teacher_outputs, student_outputs)
        _structure_check(self.loss, teacher_outputs, student_outputs, "FeatureDistillation")

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        return _apply(self.loss, teacher_outputs, student_outputs,
                      lambda fn, t, s: ops.mean(fn(t, s)), "FeatureDistillation")

    def get_config(self):
        return {"loss": _loss_config(self.loss), "teacher_layer_name": self.teacher_layer_name,
                "student_layer_name": self.student_layer_name}


class LogitsDistillation(DistillationLoss):
    """keras.distillation.LogitsDistillation: the loss (default
    "kl_divergence") between the teacher's and the student's logits, both
    divided by `temperature` (default 3.0). A KLDivergence object compares
    their softmax probabilities and is scaled by temperature**2; any other
    loss (the "kl_divergence" function included, as Keras's) takes the
    scaled logits as they are. Each output's loss is averaged, the
    outputs' summed."""

    def __init__(self, temperature=3.0, loss="kl_divergence"):
        self.temperature = temperature
        self.loss = _as_losses(loss, "LogitsDistillation")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise ValueError(f"[LogitsDistillation] temperature must be a number, got "
                             f"{temperature!r} (at {user_location()})")
        if temperature <= 0.0:
            raise ValueError(f"[LogitsDistillation] temperature must be positive, got "
                             f"{temperature!r} (at {user_location()})")

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        temp = float(self.temperature)

        def one(fn, t, s):
            t, s = t / temp, s / temp
            if isinstance(fn, _losses.KLDivergence):
                value = ops.mean(fn(ops.softmax(t, axis=-1), ops.softmax(s, axis=-1)))
                return value * (temp ** 2)
            return ops.mean(fn(t, s))

        return _apply(self.loss, teacher_outputs, student_outputs, one, "LogitsDistillation")

    def get_config(self):
        return {"temperature": self.temperature, "loss": _loss_config(self.loss)}


def _has_graph(model) -> bool:
    return isinstance(model, Sequential) or bool(getattr(model, "_functional", False))


def _final_output(model):
    return model.layers[-1].output if isinstance(model, Sequential) else model.output


def _extractor(model, names: list):
    """A functional model over `model`'s graph giving [final output, each
    named layer's output] (None without names)."""
    if not names:
        return None
    if not _has_graph(model) or not model._inputs:
        raise ValueError(f"[Distiller] cannot read the features of {model.name!r}: the model "
                         "has no symbolic inputs (build it, or make it functional/Sequential)")
    outs = [_final_output(model)] + [model.get_layer(name=n).output for n in names]
    ins = model.inputs
    return Model(inputs=ins if len(ins) > 1 else ins[0], outputs=outs,
                 name=f"{model.name}_multi_feature_extractor")


class Distiller(Model):
    """keras.distillation.Distiller: trains `student` from a frozen `teacher`
    with compile/fit/evaluate/predict. The loss is student_loss_weight
    (default 0.5, in [0, 1]) times the student's supervised loss (compile's
    `loss`) plus (1 - student_loss_weight) times the distillation losses
    (one or a list, each times its distillation_loss_weights entry, default
    1.0). fit and evaluate log "loss" and compile's metrics, and the means of
    "student_loss", "distillation_loss" and "total_loss". predict and call
    run the student; `distiller.student` is the trained model."""

    # traced into fit's and evaluate's compiled step like a user's overrides
    _traced_hooks = ("compute_loss", "compute_metrics")

    def __init__(self, teacher, student, distillation_losses, distillation_loss_weights=None,
                 student_loss_weight=0.5, name="distiller", **kwargs):
        super().__init__(name=name, **kwargs)
        _check_models(teacher, student)
        self.teacher = teacher
        self.student = student
        if isinstance(student_loss_weight, bool) or \
                not isinstance(student_loss_weight, (int, float)):
            raise ValueError(f"[Distiller] student_loss_weight must be a number, got "
                             f"{student_loss_weight!r} (at {user_location()})")
        if not 0.0 <= student_loss_weight <= 1.0:
            raise ValueError(f"[Distiller] student_loss_weight must be between 0.0 and 1.0, got "
                             f"{student_loss_weight!r} (at {user_location()})")
        self.student_loss_weight = student_loss_weight
        if distillation_losses is None:
            raise ValueError("[Distiller] distillation_losses cannot be None: give a "
                             "distillation loss (LogitsDistillation, FeatureDistillation) or a "
                             f"list of them (at {user_location()})")
        if not isinstance(distillation_losses, (list, tuple)):
            self.distillation_losses = [distillation_losses]
            self.distillation_loss_weights = [1.0]
        else:
            self.distillation_losses = list(distillation_losses)
            if distillation_loss_weights is None:
                self.distillation_loss_weights = [1.0] * len(distillation_losses)
            elif len(distillation_loss_weights) != len(distillation_losses):
                raise ValueError(f"[Distiller] {len(distillation_loss_weights)} "
                                 f"distillation_loss_weights for {len(distillation_losses)} "
                                 f"distillation_losses (at {user_location()})")
            else:
                self.distillation_loss_weights = list(distillation_loss_weights)
        for d in self.distillation_losses:
            if not isinstance(d, DistillationLoss):
                raise TypeError(f"[Distiller] distillation_losses must be DistillationLoss "
                                f"objects (LogitsDistillation, FeatureDistillation, a subclass), "
                                f"got {type(d).__name__} (at {user_location()})")
            d.validate_model_compatibility(teacher, student)
        self._teacher_names = _layer_names(self.distillation_losses, "teacher_layer_name")
        self._student_names = _layer_names(self.distillation_losses, "student_layer_name")
        self._teacher_extractor = _extractor(teacher, self._teacher_names)
        self._student_extractor = _extractor(student, self._student_names)
        self.teacher.trainable = False
        self.student_loss_tracker = _metrics.Mean(name="student_loss")
        self.distillation_loss_tracker = _metrics.Mean(name="distillation_loss")
        self.total_loss_tracker = _metrics.Mean(name="total_loss")
        self._student_loss = None
        if _has_graph(student) and student._inputs:
            ins = student._inputs
            self.build([tuple(t.shape) for t in ins] if len(ins) > 1 else tuple(ins[0].shape))

    # ------------------------------------------------------------ the graph
    def _init_graph(self, inputs, outputs):
        """The student's graph, with the teacher's layers (first, as Keras
        orders the weights) among the model's: saved, loaded and frozen."""
        super()._init_graph(inputs, outputs)
        have = {id(l) for l in self._layers}
        extra = [l for l in getattr(self.teacher, "_layers", []) if id(l) not in have]
        if extra:
            self._layers = extra + self._layers
            self._assign_vars()
            self._create_values()

    def call(self, inputs, training=None):
        """The student's outputs."""
        return self.student(inputs, training=training)

    # ------------------------------------------------------------ compile
    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """`loss`: the student's supervised loss (required; a name, a Loss or
        a function, or one per output). Keras's "accuracy" resolves from it."""
        if loss is None:
            raise ValueError(f"[Distiller.compile] loss cannot be None: it is the student's "
                             f"supervised loss (at {user_location()})")
        if metrics is not None and not isinstance(metrics, (list, tuple)):
            raise ValueError(f"[Distiller.compile] metrics must be a list or a tuple, got "
                             f"{type(metrics).__name__} (at {user_location()})")
        student_loss = _as_losses(loss, "Distiller.compile")
        hint = None if isinstance(student_loss, list) else loss
        given = metrics
        if metrics is not None:
            metrics = [_metrics.get(m, loss=_losses.loss_object(hint)) if isinstance(m, str) and
                       m.lower() in ("accuracy", "acc") and hint is not None else m
                       for m in metrics]
        super().compile(optimizer=optimizer, loss=None, metrics=metrics, **kwargs)
        self._student_loss = student_loss
        self._compile_args.update(loss=loss, metrics=given)
        return self

    def compile_from_config(self, config):
        """Compiles again with get_compile_config's arguments (the student's
        loss included)."""
        super().compile_from_config(config)

    # ------------------------------------------------------------ the loss
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """student_loss_weight * the student's loss + (1 - student_loss_weight)
        * the weighted distillation losses; the three trackers updated."""
        if self._student_loss is None:
            raise RuntimeError(f"[Distiller.compute_loss] call compile(...) first (at "
                               f"{user_location()})")
        if y_pred is None:
            y_pred = self(x, training=training)
        student_loss = 0.0
        if self.student_loss_weight > 0.0 and y is not None:
            fns = self._student_loss if isinstance(self._student_loss, list) \
                else [self._student_loss]
            ys, ps = _per_output(y, "", ""), _per_output(y_pred, "", "")
            if len(ys) != len(fns) or len(ps) != len(fns):
                raise ValueError(f"[Distiller.compute_loss] {len(fns)} student losses for "
                                 f"{len(ys)} labels and {len(ps)} outputs")
            parts = [fn(t, p) for fn, t, p in zip(fns, ys, ps) if fn is not None]
            if len(parts) == 1:
                student_loss = parts[0]
                if len(student_loss.shape) > 0:
                    student_loss = ops.mean(student_loss)
            else:  # Keras: the sum of the stacked values
                student_loss = None
                for p in parts:
                    v = ops.sum(p)
                    student_loss = v if student_loss is None else student_loss + v
        distillation_loss = 0.0
        if self.student_loss_weight < 1.0:
            teacher = self._features(self._teacher_extractor, self.teacher, x, False,
                                     self._teacher_names)
            student = self._features(self._student_extractor, None, x, True,
                                     self._student_names, y_pred)
            for fn, weight in zip(self.distillation_losses, self.distillation_loss_weights):
                t_name = getattr(fn, "teacher_layer_name", None)
                s_name = getattr(fn, "student_layer_name", None)
                if t_name is not None:
                    t_out, s_out = teacher[t_name], student[s_name or _FINAL]
                else:
                    t_out, s_out = teacher[_FINAL], y_pred
                fn.validate_outputs(t_out, s_out)
                value = fn.compute_loss(t_out, s_out)
                if value is None or len(getattr(value, "shape", ())) > 0:
                    raise ValueError(
                        f"[Distiller] {type(fn).__name__}.compute_loss returned "
                        f"{'nothing' if value is None else f'a value of shape {value.shape}'}: "
                        "it must return a scalar")
                distillation_loss = distillation_loss + weight * value
        w = float(self.student_loss_weight)
        total = w * student_loss + (1.0 - w) * distillation_loss
        self.student_loss_tracker.update_state(student_loss)
        self.distillation_loss_tracker.update_state(distillation_loss)
        self.total_loss_tracker.update_state(total)
        return total

    def _features(self, extractor, model, x, training, names, y_pred=None) -> dict:
        if extractor is None:
            return {_FINAL: model(x, training=training) if model is not None else y_pred}
        outs = extractor(x, training=training)
        return dict(zip([_FINAL] + names, outs))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """compile's metrics and the trackers' means (Keras's default)."""
        return super().compute_metrics(x, y, y_pred, sample_weight)

    @property
    def metrics(self) -> list:
        """Keras's: the loss tracker and compile's metrics (once compiled),
        then "student_loss", "distillation_loss" and "total_loss"."""
        held = super().metrics  # (a model's attribute metrics: the trackers, once built)
        return held + [m for m in (self.student_loss_tracker, self.distillation_loss_tracker,
                                   self.total_loss_tracker) if all(m is not h for h in held)]

    # ------------------------------------------------------------ saving
    def get_config(self):
        return {"name": self.name, "teacher": self.teacher, "student": self.student,
                "distillation_losses": list(self.distillation_losses),
                "distillation_loss_weights": list(self.distillation_loss_weights),
                "student_loss_weight": self.student_loss_weight}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def _layer_names(losses, attr: str) -> list:
    names = []
    for d in losses:
        n = getattr(d, attr, None)
        if n and n not in names:
            names.append(n)
    return names


def _check_models(teacher, student):
    """Keras's checks: two models of compatible input and output shapes and
    of the same dtypes."""
    for what, m in (("teacher", teacher), ("student", student)):
        if not isinstance(m, Model):
            raise ValueError(f"[Distiller] the {what} must be a tessera.nn.Model, got "
                             f"{type(m).__name__} (at {user_location()})")
    if not (teacher.built and teacher._inputs and student.built and student._inputs):
        return
    for kind, ts, ss in (("input", teacher._inputs, student._inputs),
                         ("output", teacher._outputs, student._outputs)):
        if len(ts) != len(ss):
            raise ValueError(f"[Distiller] the teacher has {len(ts)} {kind}s, the student "
                             f"{len(ss)} (at {user_location()})")
        for t, s in zip(ts, ss):
            a, b = tuple(t.shape), tuple(s.shape)
            if len(a) != len(b) or any(p is not None and q is not None and p != q
                                       for p, q in zip(a, b)):
                raise ValueError(f"[Distiller] the teacher's and the student's {kind} shapes "
                                 f"are incompatible: teacher {a}, student {b} (at "
                                 f"{user_location()})")
            if t.dtype != s.dtype:
                raise ValueError(f"[Distiller] the teacher's and the student's {kind} dtypes "
                                 f"must match: teacher {t.dtype}, student {s.dtype} (at "
                                 f"{user_location()})")


for _cls in (Distiller, LogitsDistillation, FeatureDistillation):
    register_builtin(_cls)

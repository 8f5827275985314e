"""keras.optimizers.schedules: tessera.optim's learning-rate schedules."""

from ...optim import (CosineDecay, CosineDecayRestarts, ExponentialDecay, InverseTimeDecay,
                      LearningRateSchedule, LinearWarmup, PiecewiseConstantDecay, PolynomialDecay,
                      StepDecay)

__all__ = ["CosineDecay", "CosineDecayRestarts", "ExponentialDecay", "InverseTimeDecay",
           "LearningRateSchedule", "LinearWarmup", "PiecewiseConstantDecay", "PolynomialDecay",
           "StepDecay"]

"""The one training loop of the core (issue 41): seeded batch order, a checkpoint after every epoch that a killed or
cancelled run resumes from, cancel between batches, and an optional moving average of the weights. The fix
(analyses/fix/training.py) and the competency estimator's autoencoder (analyses/competency/fit.py) train with it.

    loop = TrainingLoop(module, optimizer, epochs=5, batch_size=32, stage="Training",
                        shuffle_seed=lambda epoch: seed + epoch, checkpoint=Checkpoint(path, key))
    loop.resume()                                    # the last finished epoch of the same key, if any
    loop.run(rows, lambda idx: loss_of(idx), ctx, end_epoch=judge)   # judge(entry) -> True to stop early
"""
from .average import WeightAverage, trained_state
from .checkpoint import OLDER_VERSION, Checkpoint
from .loop import TrainingLoop

__all__ = ["OLDER_VERSION", "Checkpoint", "TrainingLoop", "WeightAverage", "trained_state"]

"""Training: optax optimizers and schedules, jitted steps, orbax checkpoints, metrics, sharding, the loop."""

from rfa.models.sharding import state_sharding
from rfa.tasks import shift_right
from rfa.train.checkpoint import CheckpointError, Checkpoints
from rfa.train.config import ATTENTION_VARIANTS, base_config, build_model, check_config, model_config, task_config
from rfa.train.loop import TrainingInterrupted, evaluate, train_and_evaluate
from rfa.train.metrics import MetricWriter, plot_curves, read_metrics
from rfa.train.optim import make_optimizer, make_schedule, weight_decay_mask
from rfa.train.sharding import DistributedError, global_batch, initialize_distributed, make_mesh
from rfa.train.steps import make_eval_step, make_train_step, metric_sums, summarize
from rfa.train.trained import evaluate_model, load_model

__all__ = [
    "ATTENTION_VARIANTS",
    "CheckpointError",
    "Checkpoints",
    "DistributedError",
    "MetricWriter",
    "TrainingInterrupted",
    "base_config",
    "build_model",
    "check_config",
    "evaluate",
    "evaluate_model",
    "global_batch",
    "initialize_distributed",
    "load_model",
    "make_eval_step",
    "make_mesh",
    "make_optimizer",
    "make_schedule",
    "make_train_step",
    "metric_sums",
    "model_config",
    "plot_curves",
    "read_metrics",
    "shift_right",
    "state_sharding",
    "summarize",
    "task_config",
    "train_and_evaluate",
    "weight_decay_mask",
]

"""DPZero paper, language-model fine-tuning: Tables 2, 3 and 5 (docs/papers.md, DPZero §4.2) on a sentence encoder.

The runs are what ``dpnc finetune`` runs by default: ``--train head`` (a linear head on the frozen
all-MiniLM-L6-v2 sentence embeddings, initialised from the label prompts, so that it starts as the zero-shot
classifier) with the trainer's zeroth-order recipe for that mode (:data:`dpnc.lm.config.ZO_RECIPES`: step size, C,
λ, B, T). Every config field left None takes the trainer's default, so the reproduction and the command line
cannot drift apart; every row records the values its run used.

The unit of work is one k-shot folder (:class:`LMGroup`: a task and a data seed). Its runs (zero-shot, MeZO,
DPZero at each ε, and the sphere-direction DPZero runs of Table 5) share one process: the first trainer computes
the frozen prefix of the network once per example (:mod:`dpnc.lm.cache`: for ``--train head`` the sentence
embeddings of the train and test texts, about a minute per 2000 examples on a CPU) and the others reuse it, so a
run then costs only its steps (milliseconds each). ``workers`` groups run side by side, by default each in a fresh
process of its own (``isolate``) with ``threads`` torch threads. From the runs
:mod:`dpnc_reproduce.dpzero_lm.tables` and :mod:`~dpnc_reproduce.dpzero_lm.render` build

* Table 2: test accuracy of zero-shot, MeZO and DPZero at each ε (Gaussian directions), per task, mean ± standard
  error over the k-shot data seeds (each seed is also the training seed, as in the paper);
* Table 3 (``fo_methods``; not in ``FULL``): on SST-2, the first seed: accuracy, time per iteration and peak
  memory of AdamW, DP-AdamW, MeZO and DPZero at the Table 3 ε. Peak memory (``ru_maxrss``) is a process's, so
  each of these four runs is a group of its own (with ``isolate``, a process of its own);
* Table 5 (``sphere_tasks``; not in ``FULL``): DPZero with Gaussian vs sphere directions at each ε;

each beside the paper's numbers (RoBERTa-large, all parameters, T = 10 000, B = 64 on an RTX 3090).

Privacy: DPZero and DP-AdamW draw secret Poisson batches of rate q = B/n with n the *true* train-set size
(``len(dataset)``: TREC's 512-shot set has 2646 rows, not 3072) and calibrate the noise multiplier with dpnc's
accountant (RDP by default) so that the run's T releases spend the target (ε, δ); each row records ε by RDP and
by the tight PLD, both computed from the run's own ledger. The ε covers the trained model, the released values
and the test results. It does **not** cover the per-step times, training losses and clipped fractions that the
tables and the figure also show: the runs are made with the trainer's ``log_private_stats`` (a reproduction on a
public benchmark measures time per step), and these un-noised training-data statistics are labelled "not private"
wherever they appear. (The cached prefix is no release: the same function of an example that each forward pass
would compute.)

Correction: the paper fine-tunes RoBERTa-large (355M) with its masked-LM head scoring the label words at
``<mask>``. The offline model here, all-MiniLM-L6-v2 (22.7M), has no MLM head: the head of :mod:`dpnc.lm.heads`
scores a class by the similarity of the input's embedding to its label prompt's ("It was great."), which is
zero-shot capable too. Which parameters are trained (``train``), T and B are stated in every output.

Run it with :func:`dpnc_reproduce.protocol.run_experiment` (``EXPERIMENT``, a config) and write it with
:func:`dpnc_reproduce.protocol.write`.
"""

from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT, DPZeroLM
from dpnc_reproduce.dpzero_lm.run import FULL, QUICK, TASK_RECIPES, LMConfig, LMGroup, LMRow, LMTask

__all__ = [
    "EXPERIMENT",
    "DPZeroLM",
    "FULL",
    "QUICK",
    "TASK_RECIPES",
    "LMConfig",
    "LMGroup",
    "LMRow",
    "LMTask",
]

"""Run every Keras-style script of this folder in its own process with tessera.nn.

Usage: python tests/keras_io/run_all.py [-t SECONDS] [--compare [--seed N] | --max-epochs N] [NAME ...]

Prints one line per script (ran / FAILED, seconds), then "N of M ran" and the
last error line of each failure. Scripts run one at a time; each gets
TESSERA_THREADS=2 unless the environment sets it.

--compare runs each script twice through _driver.py: under Keras 3 (JAX backend,
the imports turned back into `import keras` / `from keras import ...`) and under
tessera.nn, from the same seeds and so on the same data, and prints a table of the
last `fit` of each script: the loss over its first 256 training samples just before
and just after it, its final epoch's loss and accuracy, in both. A script is "in
line" when both run, both learn (the loss after is below the loss before) and their
final epoch losses are within a factor of
10 of each other (and accuracies within 0.25); a guide that trains nothing is in line
when both run it through (its own checks, asserts that hold under Keras, included).
Exit status 1 when one is not.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def scripts():
    return sorted(f[:-3] for f in os.listdir(HERE)
                  if f.endswith(".py") and f != "run_all.py" and not f.startswith("_"))


def last_error_line(stderr):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    for line in reversed(lines):
        if not line.startswith((" ", "\t")) and ("Error" in line or "Exception" in line):
            return line.strip()
    return lines[-1].strip() if lines else "(no output on stderr)"


def run_one(name, timeout, threads=None, max_epochs=None):
    """(ran, seconds, error, output) of one script in a process of its own, at
    `threads` tessera threads (default: TESSERA_THREADS, else 2); with `max_epochs`,
    each of its fits runs at most that many epochs (_capped.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    if threads is not None:
        env["TESSERA_THREADS"] = str(threads)
    env.setdefault("TESSERA_THREADS", "2")
    env.setdefault("MPLBACKEND", "Agg")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:  # files a script writes stay out of the tree
        try:
            script = os.path.join(HERE, name + ".py")
            cmd = ([sys.executable, script] if max_epochs is None else
                   [sys.executable, os.path.join(HERE, "_capped.py"), str(max_epochs), script])
            p = subprocess.run(cmd, cwd=cwd,
                               env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, time.perf_counter() - start, f"timed out after {timeout} s", ""
    took = time.perf_counter() - start
    if p.returncode == 0:
        return True, took, "", p.stdout
    return False, took, last_error_line(p.stderr), p.stderr


# Scripts that stop at a gap of tessera.nn refused by name (docs/nn.md), and the error each
# must stop with (the start of its last line): such a stop counts as the script's run; running
# through (the gap closed: move it to the runs) or another error counts as a failure.
# None at present: the last two (debugging_tips, metric_learning) run since 2026-12-05.
STOPS: dict = {}


def as_documented(name, ok, err):
    """(ran as it should, what to print) for a script's run: a STOPS script must stop with
    its documented error."""
    if name not in STOPS:
        return ok, ("ran   " if ok else "FAILED")
    stopped = not ok and err.startswith(STOPS[name])
    return stopped, ("stops " if stopped else "FAILED")


# Scripts Keras itself cannot run here, and why (no comparison; tessera's run still counts).
KERAS_CANNOT = {
    "structured_data_classification_with_feature_space": "Keras's FeatureSpace needs "
                                                         "TensorFlow (tf.data), not installed "
                                                         "here; test_nn_feature_space.py "
                                                         "compares its encodings with Keras's "
                                                         "layers",
    "text_classification_from_scratch": "Keras's TextVectorization needs TensorFlow, "
                                        "not installed here",
    "timeseries_weather_forecasting": "Keras's timeseries_dataset_from_array needs "
                                      "TensorFlow (tf.data), not installed here",
    "conditional_gan": "its train_step takes TensorFlow's GradientTape (keras.GradientTape "
                       "is tessera's), not installed here; test_nn_gan_train_step.py compares "
                       "a GAN's step with Keras's stateless JAX updates",
    "dcgan_overriding_train_step": "its train_step takes TensorFlow's GradientTape "
                                   "(keras.GradientTape is tessera's), not installed here; "
                                   "test_nn_gan_train_step.py compares the GAN's step with "
                                   "Keras's stateless JAX updates",
    "wgan_gp": "its train_step takes TensorFlow's GradientTape (keras.GradientTape is "
               "tessera's), not installed here; test_nn_wgan_gp_step.py compares the "
               "WGAN-GP step (the gradient penalty's second-order gradient) with Keras's "
               "stateless JAX updates and jax.grad inside jax.value_and_grad",
    "custom_train_step_in_tensorflow": "the guide's train_steps take TensorFlow's GradientTape "
                                       "(keras.GradientTape is tessera's), not installed here; "
                                       "test_nn_keras_io_seventeenth.py compares its step (with "
                                       "sample weights, compile's metrics and weighted_metrics) "
                                       "with Keras's own train_step",
    "vae": "the guide's train_step takes TensorFlow's GradientTape (keras.GradientTape is "
           "tessera's), not installed here; test_nn_step_overrides.py compares the VAE's step "
           "with Keras's compute_loss",
    "vq_vae": "its VQVAETrainer's train_step takes TensorFlow's GradientTape "
              "(keras.GradientTape is tessera's), not installed here; "
              "test_nn_keras_io_ninth.py compares the quantizer's step (its added loss "
              "read from model.losses in the tape) with Keras's stateless JAX step",
    "trainer_pattern": "its train_step takes TensorFlow's GradientTape (keras.GradientTape is "
                       "tessera's), not installed here; test_nn_keras_io_tenth.py compares "
                       "the trainer's steps with Keras's compiled fit of the same model",
    "metric_learning": "its train_step takes TensorFlow's GradientTape (keras.GradientTape is "
                       "tessera's) and Keras 3's TensorFlow-only compiled_loss / "
                       "compiled_metrics shims, not installed here; test_nn_tapes20.py "
                       "compares such a step (a batch sliced into anchors and positives) "
                       "with Keras's stateless JAX updates",
    "debugging_tips": "its train_step takes TensorFlow's GradientTape (keras.GradientTape is "
                      "tessera's), two nested for a second-order term, not installed here; "
                      "test_nn_tapes20.py compares the step with Keras on JAX (stateless_call, "
                      "jax.grad of jax.grad) and finite differences",
    "pretrained_word_embeddings": "Keras's TextVectorization needs TensorFlow, not "
                                  "installed here",
    "neural_machine_translation_with_transformer": "Keras's TextVectorization and the "
                                                   "example's tf.data pipeline need "
                                                   "TensorFlow, not installed here; "
                                                   "test_nn_keras_io_fifth.py compares the "
                                                   "model's masks, loss and accuracy with "
                                                   "Keras's",
    "text_generation_with_miniature_gpt": "the example's causal mask calls ops.tile with "
                                          "repeats computed from the batch size, which JAX "
                                          "0.7+ refuses while Keras traces (reps must be "
                                          "hashable); it runs on Keras's TensorFlow backend",
}


def run_driven(name, framework, timeout, seed=None):
    """Runs `name` through _driver.py under `framework` ("keras" or "tessera");
    returns (record dict, seconds). The record's "error" says why a run failed.
    `seed`: the framework's seed in place of the script's (_driver.reseed)."""
    env = dict(os.environ)
    if seed is not None:
        env["KERAS_IO_SEED"] = str(seed)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TESSERA_THREADS", "2")
    env.setdefault("MPLBACKEND", "Agg")
    env["KERAS_BACKEND"] = "jax"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        out = os.path.join(cwd, "record.json")
        try:
            p = subprocess.run([sys.executable, os.path.join(HERE, "_driver.py"), framework,
                                os.path.join(HERE, name + ".py"), out], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"fits": [], "evaluates": [], "error": f"timed out after {timeout} s"}, timeout
        took = time.perf_counter() - start
        if not os.path.exists(out):
            return {"fits": [], "evaluates": [], "error": last_error_line(p.stderr)}, took
        with open(out, encoding="utf-8") as f:
            record = json.load(f)
    if record["error"]:
        record["error"] = last_error_line(record["error"])
    return record, took


def summary(record):
    """(loss before, loss after, final epoch loss, final epoch accuracy or None) of
    the record's last fit, or None when it has no fit with losses. Before and after:
    the loss over the first training samples just before and after the fit
    (_driver.py's probe), or when it could not be taken, the first batch's loss and
    the final epoch's."""
    fits = [f for f in record["fits"] if f["batch_losses"] and f["epochs"]]
    if not fits:
        return None
    fit = fits[-1]
    last = fit["epochs"][-1]
    acc = [v for k, v in last.items() if "acc" in k and not k.startswith("val_")]
    before, after = fit.get("probe_before"), fit.get("probe_after")
    if not (isinstance(before, float) and isinstance(after, float)):
        before, after = fit["batch_losses"][0], last.get("loss")
    return before, after, last.get("loss"), acc[0] if acc else None


def in_line(keras_record, tessera_record):
    """"" when the two runs are in line, else the reason they are not."""
    for who, r in (("keras", keras_record), ("tessera", tessera_record)):
        if r["error"]:
            return f"{who} failed: {r['error']}"
    if not keras_record["fits"] and not tessera_record["fits"]:
        return ""  # a guide that trains nothing: both ran it (and its checks) through
    k, t = summary(keras_record), summary(tessera_record)
    if k is None or t is None:
        return "no fit with losses to compare"
    if len(keras_record["fits"]) != len(tessera_record["fits"]):
        return f"{len(keras_record['fits'])} fits under keras, {len(tessera_record['fits'])} under tessera"
    for who, (before, after, _, _) in (("keras", k), ("tessera", t)):
        if after is None or not after < before:
            return f"{who} did not learn (loss {before:.4g} before, {after} after)"
    if k[2] * t[2] <= 0 or abs(math.log10(t[2] / k[2])) > 1:
        return f"final losses differ by more than 10x ({k[2]:.4g} vs {t[2]:.4g})"
    if (k[3] is None) != (t[3] is None) or (k[3] is not None and abs(k[3] - t[3]) > 0.25):
        return f"accuracies differ ({k[3]} vs {t[3]})"
    return ""


def _cell(s):
    if s is None:
        return "- (no fit)"
    before, after, final, acc = s
    return (f"{before:.4g} -> {after:.4g} | {final:.4g}"
            + (f", {acc:.3f}" if acc is not None else ""))


def compare(names, timeout, seed=None):
    """Runs each script under Keras and tessera.nn and prints the table; returns
    the number of scripts not in line."""
    print("loss before -> after fit (first 256 training samples) | final epoch loss, accuracy; "
          "of each script's last fit", flush=True)
    print(f"{'script':40s} {'keras':34s} {'tessera':34s} "
          f"{'keras s':>7s} {'tessera s':>9s}  in line", flush=True)
    bad = 0
    for name in names:
        t, tt = run_driven(name, "tessera", timeout, seed)
        if name in STOPS:
            stopped = bool(t["error"]) and t["error"].startswith(STOPS[name])
            bad += not stopped
            print(f"{name:40s} {'n/a':34s} {'- (stops)':34s} {'-':>7s} {tt:9.1f}  "
                  + (f"stops as documented: {STOPS[name]}" if stopped else
                     f"NO: should stop with {STOPS[name]!r}, got {t['error']}"), flush=True)
            continue
        if name in KERAS_CANNOT:
            why = f"tessera failed: {t['error']}" if t["error"] else ""
            bad += bool(why)
            print(f"{name:40s} {'n/a':34s} {_cell(summary(t)):34s} {'-':>7s} {tt:9.1f}  "
                  f"{'not compared: ' + KERAS_CANNOT[name] if not why else 'NO: ' + why}",
                  flush=True)
            continue
        k, kt = run_driven(name, "keras", timeout, seed)
        why = in_line(k, t)
        bad += bool(why)
        print(f"{name:40s} {_cell(summary(k)):34s} {_cell(summary(t)):34s} {kt:7.1f} {tt:9.1f}  "
              f"{'yes' if not why else 'NO: ' + why}", flush=True)
    print(f"\n{len(names) - bad} of {len(names)} in line with Keras")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scripts to run (default: all)")
    ap.add_argument("-t", "--timeout", type=float, default=120.0)
    ap.add_argument("--compare", action="store_true",
                    help="run each under Keras (JAX) and tessera.nn and compare their losses")
    ap.add_argument("--max-epochs", type=int, default=None, metavar="N",
                    help="cut each fit to at most N epochs (a quicker check that every "
                         "script runs; not with --compare)")
    ap.add_argument("--seed", type=int, default=None, metavar="N",
                    help="with --compare: seed both frameworks with N wherever a script "
                         "calls keras.utils.set_random_seed (its data stay the same): how "
                         "much a result owes to the framework's own random draws")
    args = ap.parse_args(argv)
    if args.seed is not None and not args.compare:
        ap.error(f"--seed {args.seed}: only with --compare")
    if args.max_epochs is not None and (args.compare or args.max_epochs < 1):
        ap.error(f"--max-epochs {args.max_epochs}: a positive count, and not with --compare "
                 "(the comparison needs each script's whole training)")
    names = args.names or scripts()
    if args.compare:
        return 1 if compare(names, args.timeout, args.seed) else 0
    failures = []
    for name in names:
        ok, took, err, _ = run_one(name, args.timeout, max_epochs=args.max_epochs)
        ok, word = as_documented(name, ok, err)
        print(f"{word} {name:45s} {took:6.1f} s", flush=True)
        if not ok:
            failures.append((name, err or "ran through, but should stop: " + STOPS[name]))
    print(f"\n{len(names) - len(failures)} of {len(names)} ran")
    for name, err in failures:
        print(f"  {name}: {err}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

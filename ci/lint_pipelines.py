"""Checks the CI files kubechaos ships and the ones `kubechaos init --ci` writes, with what each
CI system's own tooling checks, as far as it runs without that system:

- GitLab: each pipeline is resolved as GitLab resolves it (its `include:`s read, kubechaos's
  template standing in for its published copy, `extends:` merged: hashes deeply, everything else
  replaced; hidden `.jobs` dropped), and every resulting job is validated against GitLab's CI
  schema; each job's script (before_script, script) passes shellcheck.
- GitHub: action.yml is validated against GitHub's action metadata schema, and each of its `run:`
  scripts passes shellcheck. (Workflows are checked by actionlint, which ci/lint-pipelines runs.)

Usage: lint_pipelines.py gitlab FILE... | action FILE
Exit 1 with what is wrong; 0 when every check passed.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

from ruamel.yaml import YAML

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "gitlab", "kubechaos.gitlab-ci.yml")
# GitLab's global keywords: not jobs.
GLOBAL = {"default", "include", "stages", "variables", "workflow", "image", "services", "cache",
          "before_script", "after_script", "spec"}


def load(path):
    with open(path) as f:
        return YAML(typ="safe").load(f) or {}


def included(entry, base):
    """The file an `include:` entry names, here."""
    if isinstance(entry, str):
        entry = {"remote" if "://" in entry else "local": entry}
    if "local" in entry:
        return os.path.join(base, entry["local"].lstrip("/"))
    if "remote" in entry and entry["remote"].endswith("/ci/gitlab/kubechaos.gitlab-ci.yml"):
        return TEMPLATE
    raise SystemExit(f"include {entry}: only local files and kubechaos's template can be read here")


def gather(path, base):
    """The pipeline's keys, its includes' first (the including file wins, as in GitLab)."""
    doc = load(path)
    merged = {}
    incs = doc.get("include", [])
    for entry in incs if isinstance(incs, list) else [incs]:
        merged.update(gather(included(entry, base), base))
    merged.update({k: v for k, v in doc.items() if k != "include"})
    return merged


def deep_merge(low, high):
    out = dict(low)
    for k, v in high.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve(jobs, name, seen=()):
    if name in seen:
        raise SystemExit(f"{name}: extends itself")
    job = jobs[name]
    parents = job.get("extends", [])
    parents = [parents] if isinstance(parents, str) else parents
    out = {}
    for p in parents:
        if p not in jobs:
            raise SystemExit(f"{name}: extends {p}, which no file defines")
        out = deep_merge(out, resolve(jobs, p, seen + (name,)))
    return deep_merge(out, {k: v for k, v in job.items() if k != "extends"})


def check(label, what, suffix, content, argv):
    """Run the tool `argv` on `content` written to a temporary file; print what it says and
    return False when it fails."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(content)
    try:
        r = subprocess.run(argv + [f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        print(f"{label}: {what}:\n{r.stdout.replace(f.name, label)}{r.stderr}")
        return False
    return True


def shellcheck(label, script, shell="bash"):
    # Both systems run scripts as `bash -eo pipefail` does.
    return check(label, "shellcheck", ".sh", f"#!/usr/bin/env {shell}\nset -eo pipefail\n{script}\n",
                 ["shellcheck", "-s", shell, "-S", "warning"])


def schema(label, doc, name):
    return check(label, f"{name} schema", ".json", json.dumps(doc),
                 ["check-jsonschema", "--builtin-schema", name])


def gitlab(path, base):
    everything = gather(path, base)
    jobs = {k: v for k, v in everything.items() if k not in GLOBAL and isinstance(v, dict)}
    concrete = {n: resolve(jobs, n) for n in jobs if not n.startswith(".")}
    if not concrete:
        # A template of hidden jobs only: each is checked as the job that extends it would be.
        concrete = {n.lstrip("."): resolve(jobs, n) for n in jobs}
    ok = schema(path, {**{k: v for k, v in everything.items() if k in GLOBAL - {"include"}},
                       **concrete}, "vendor.gitlab-ci")
    for n, job in concrete.items():
        if "script" not in job:
            print(f"{path}: job {n} has no script")
            ok = False
            continue
        lines = []
        for key in ("before_script", "script"):
            v = job.get(key, [])
            lines += v if isinstance(v, list) else [v]
        ok &= shellcheck(f"{path}: job {n}", "\n".join(lines))
    return ok


def action(path):
    doc = load(path)
    ok = schema(path, doc, "vendor.github-actions")
    for i, step in enumerate(doc["runs"].get("steps", [])):
        if "run" in step:
            # An expression is a value GitHub puts in before the shell sees the script.
            script = re.sub(r"\$\{\{[^}]*\}\}", "VALUE", step["run"])
            ok &= shellcheck(f"{path}: step {i + 1} ({step.get('name', 'unnamed')})", script,
                             step.get("shell", "bash"))
    return ok


def main(argv):
    if len(argv) < 3 or argv[1] not in ("gitlab", "action"):
        raise SystemExit(__doc__)
    ok = True
    for path in argv[2:]:
        if argv[1] == "gitlab":
            # A pipeline's `include: local:` paths are from its repository's root.
            base = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(path)),
                                   "rev-parse", "--show-toplevel"],
                                  capture_output=True, text=True).stdout.strip() or "."
            ok &= gitlab(path, base)
        else:
            ok &= action(path)
        print(f"{'ok' if ok else 'FAILED'}: {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

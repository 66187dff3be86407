#!/usr/bin/env python3
"""The image builds: runs the Dockerfile's build from exactly what `docker build .` would see.

No container engine here can pull base images, so CI cannot run `docker build`; what broke the
image before was not the toolchain but the context (`Cargo.toml` declared `[[bench]] store`,
the Dockerfile copied no `benches/`, and cargo stopped before compiling anything). This script
reproduces that part faithfully and cheaply:

1. the build context: every file under the repository root that `.dockerignore` does not
   leave out, by Docker's rules (patterns relative to the root, `*` within a path segment,
   `**` across any number of them, `!` re-includes, the last matching pattern wins, and a
   pattern that matches a directory leaves out everything under it);
2. the build stage's `WORKDIR` and `COPY` instructions, from that context into a scratch
   root under `target/docker-context/`;
3. the stage's `cargo build` command there, as `cargo check` without `--release`: cargo reads
   the manifest and every target it declares, checks the lockfile (`--locked`), runs build.rs
   (the protos) and compiles every module and included asset exactly as the release build
   would, minus code generation (a release build takes about 7 minutes on two cores).
   CARGO_TARGET_DIR is the repository's `target/` (unless set), so compiled dependencies are
   reused, and copies keep their modification times, so an unchanged tree costs nothing.

A file the build needs that the context lacks fails here. Usage:
    .ci/docker_context.py [--dockerfile PATH]     (from anywhere; exits with cargo's status)
"""
import argparse
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "target", "docker-context")


# --- .dockerignore -------------------------------------------------------------------------


def compile_pattern(pattern):
    """One .dockerignore line as (regex, exclusion), like moby's patternmatcher."""
    exclusion = pattern.startswith("!")
    if exclusion:
        pattern = pattern[1:].strip()
    pattern = posixpath.normpath(pattern).lstrip("/")
    regex, i = "^", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*" and pattern[i + 1 : i + 2] == "*":
            i += 2
            if pattern[i : i + 1] == "/":
                i += 1
            regex += ".*" if i >= len(pattern) else "(.*/)?"
            continue
        if c == "*":
            regex += "[^/]*"
        elif c == "?":
            regex += "[^/]"
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                sys.exit(f".dockerignore: unterminated [ in {pattern!r}")
            regex += "[" + pattern[i + 1 : end].replace("\\", "\\\\") + "]"
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            regex += re.escape(pattern[i])
        else:
            regex += re.escape(c)
        i += 1
    return re.compile(regex + "$"), exclusion


def read_dockerignore():
    path = os.path.join(ROOT, ".dockerignore")
    if not os.path.exists(path):
        return []
    patterns = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                patterns.append(compile_pattern(line))
    return patterns


def excluded(path, patterns):
    """Whether the context leaves out `path` (relative, with `/`): the last pattern that
    matches it or one of its parent directories decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for regex, exclusion in patterns:
        if any(regex.match(p) for p in prefixes):
            verdict = not exclusion
    return verdict


def context_files(patterns):
    """Every file of the build context, as relative paths (never this script's scratch tree)."""
    reincludes = any(exclusion for _, exclusion in patterns)
    files = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT).replace(os.sep, "/")
        rel = "" if rel == "." else rel + "/"
        # An excluded directory is skipped whole unless a `!` pattern might reach inside it.
        if not reincludes:
            dirnames[:] = [d for d in dirnames if not excluded(rel + d, patterns)]
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) != SCRATCH]
        dirnames.sort()
        for name in sorted(filenames):
            if not excluded(rel + name, patterns):
                files.append(rel + name)
    return files


# --- Dockerfile ------------------------------------------------------------------------------


def instructions(dockerfile):
    """(keyword, arguments) per instruction: comments dropped, continuations joined."""
    out, pending = [], ""
    with open(dockerfile, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            full = (pending + stripped).strip()
            pending = ""
            if full:
                keyword, _, rest = full.partition(" ")
                out.append((keyword.upper(), rest.strip()))
    return out


def build_stage(dockerfile):
    """The instructions of the (first) stage that runs `cargo build`."""
    stages, current = [], None
    for keyword, rest in instructions(dockerfile):
        if keyword == "FROM":
            current = []
            stages.append(current)
        elif current is not None:
            current.append((keyword, rest))
    for stage in stages:
        if any(k == "RUN" and re.search(r"\bcargo\s+build\b", r) for k, r in stage):
            return stage
    sys.exit(f"{dockerfile}: no stage runs `cargo build`; update .ci/docker_context.py with it")


def expand(text, args):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), text)


def copy_into(image_root, workdir, sources, dest, files):
    """Docker's COPY from the context (`files`) into the scratch image root: a directory's
    contents go into the destination, a file goes into it when it is a directory (a trailing
    `/`, several sources, or one that exists) and becomes it otherwise. Sources may be globs."""
    dest_abs = dest if dest.startswith("/") else posixpath.join(workdir, dest)
    into_dir = dest.endswith("/") or len(sources) > 1 or os.path.isdir(
        os.path.join(image_root, dest_abs.lstrip("/"))
    )
    total = 0
    for source in sources:
        source = posixpath.normpath(source).lstrip("/")
        regex = None if source == "." else compile_pattern(source)[0]
        count = 0
        for rel in files:
            parts = rel.split("/")
            if regex is None:
                target = posixpath.join(dest_abs, rel)
            else:
                depth = next((i for i in range(1, len(parts) + 1) if regex.match("/".join(parts[:i]))), None)
                if depth is None:
                    continue
                if depth < len(parts):
                    target = posixpath.join(dest_abs, *parts[depth:])
                elif into_dir:
                    target = posixpath.join(dest_abs, parts[-1])
                else:
                    target = dest_abs
            path = os.path.join(image_root, target.lstrip("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), path)
            count += 1
        if count == 0:
            sys.exit(f"COPY {source}: nothing in the build context matches it (see .dockerignore)")
        total += count
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dockerfile", default=os.path.join(ROOT, "Dockerfile"))
    options = parser.parse_args()

    patterns = read_dockerignore()
    files = context_files(patterns)
    print(f"docker context: {len(files)} files after .dockerignore")

    image_root = os.path.join(SCRATCH, "root")
    shutil.rmtree(image_root, ignore_errors=True)
    os.makedirs(image_root)
    workdir, args, command = "/", {}, None
    for keyword, rest in build_stage(options.dockerfile):
        if keyword == "WORKDIR":
            workdir = posixpath.join(workdir, expand(rest, args))
        elif keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = shlex.split(default)[0] if default.strip() else ""
        elif keyword == "ENV":
            name, _, value = rest.partition("=")
            args[name.strip()] = shlex.split(value)[0] if value.strip() else ""
        elif keyword == "COPY":
            if rest.lstrip().startswith("["):
                sys.exit(f"COPY {rest}: the JSON form is not supported here yet")
            words = shlex.split(rest)
            if any(w.startswith("--from") for w in words):
                continue
            words = [w for w in words if not w.startswith("--")]
            *sources, dest = [expand(w, args) for w in words]
            count = copy_into(image_root, workdir, sources, dest, files)
            print(f"COPY {' '.join(sources)} {dest}: {count} files")
        elif keyword == "RUN" and re.search(r"\bcargo\s+build\b", rest):
            command = shlex.split(expand(rest, args))

    cargo = command.index("cargo")
    command = command[cargo:]
    command[command.index("build")] = "check"
    command = [w for w in command if w != "--release"]
    cwd = os.path.join(image_root, workdir.lstrip("/"))
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print(f"in {os.path.relpath(cwd, ROOT)}: {shlex.join(command)}", flush=True)
    sys.exit(subprocess.run(command, cwd=cwd, env=env).returncode)


if __name__ == "__main__":
    main()

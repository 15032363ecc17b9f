"""Test helper: what a user gets from ``pip install``, built from this checkout.

    dists = build_dists(tmp)          # the sdist and the wheel, built from a copy of the checkout
    venv = Venv.create(tmp / "venv")  # a fresh virtual environment: no system site-packages
    venv.pip_install(dists.wheel)     # dependencies from the package index, as a user's
    venv.run("rocketpy-admin")        # from another directory, with no source tree on the path

The copy holds the files git tracks plus the untracked ones it does not ignore (what a fresh
clone plus local changes holds), never the checkout's ``build/``, compiled modules or egg-info:
a stale ``build/lib`` would put modules into the wheel that the sources no longer have.
The sdist is built with PyPA's ``build`` (from a tools environment of its own); the wheel is
what ``pip install .`` builds (``pip wheel``), so ``venv.pip_install(checkout copy)`` and the
wheel are the same thing.

Commands run with a clean environment (:meth:`Venv.env`): no ``PYTHONPATH``/``PYTHONHOME``, no
user site-packages, the venv's ``bin`` first on ``PATH``, a temporary ``HOME`` (the server keeps
``~/namesrv`` there), and a working directory outside the checkout -- so the editable install of
the checkout in the system interpreter's site-packages cannot be seen.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["REPO_ROOT", "Venv", "Dists", "build_dists", "checkout_files"]

REPO_ROOT = Path(__file__).resolve().parents[1]
#: bound on a package build or install (an index that stalls fails the test, never hangs it)
INSTALL_TIMEOUT = 900


def _no_python_vars(env):
    return {k: v for k, v in env.items()
            if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "__PYVENV_LAUNCHER__")}


def checkout_files(root=REPO_ROOT):
    """The checkout's files as git sees them: tracked, plus untracked ones not ignored."""
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard"], capture_output=True, check=True, timeout=60)
    return sorted({name for name in done.stdout.decode().split("\0")
                   if name and (root / name).is_file()})


def copy_checkout(dest, root=REPO_ROOT):
    """Copy :func:`checkout_files` to ``dest`` (a fresh clone's tree, local changes included)."""
    for name in checkout_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return dest


class Venv:
    """A virtual environment made with ``python3 -m venv`` (no system site-packages)."""

    def __init__(self, path, home, workdir):
        self.path = Path(path)
        self.home = Path(home)
        self.workdir = Path(workdir)

    @classmethod
    def create(cls, path):
        path = Path(path)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300,
                       env=_no_python_vars(os.environ))
        home, workdir = path.parent / f"{path.name}-home", path.parent / f"{path.name}-cwd"
        home.mkdir()
        workdir.mkdir()
        return cls(path, home, workdir)

    def bin(self, name):
        return str(self.path / "bin" / name)

    @property
    def python(self):
        return self.bin("python")

    def env(self, **extra):
        """The environment commands run with (see the module docstring)."""
        env = _no_python_vars(os.environ)
        env.update(PATH=f"{self.path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                   HOME=str(self.home), PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1",
                   VIRTUAL_ENV=str(self.path))
        env.update(extra)
        return env

    def pip_install(self, *requirements):
        """``pip install`` into the venv (the real ``HOME``: pip's cache is kept between runs)."""
        env = _no_python_vars(os.environ)
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        done = subprocess.run([self.python, "-m", "pip", "install", "-q", *map(str, requirements)],
                              cwd=self.workdir, env=env, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT)
        if done.returncode:
            raise AssertionError(f"pip install {' '.join(map(str, requirements))} failed:\n"
                                 f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")

    def command(self, name, *args):
        return [self.bin(name), *map(str, args)]

    def run(self, name, *args, timeout=120, cwd=None, **kwargs):
        """Run the installed console script ``name``; the CompletedProcess (text)."""
        return subprocess.run(self.command(name, *args), cwd=cwd or self.workdir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kwargs)

    def popen(self, name, *args, cwd=None, **kwargs):
        """Start the installed console script ``name`` (stdout and stderr: one pipe)."""
        return subprocess.Popen(self.command(name, *args), cwd=cwd or self.workdir,
                                env=self.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, **kwargs)


class Dists:
    def __init__(self, sdist, wheel, source):
        self.sdist, self.wheel, self.source = Path(sdist), Path(wheel), Path(source)


def build_dists(tmp):
    """The sdist and the wheel of the checkout (see the module docstring), built in ``tmp``."""
    tmp = Path(tmp)
    source = copy_checkout(tmp / "source")
    out = tmp / "dist"
    tools = Venv.create(tmp / "tools")
    tools.pip_install("build")
    env = _no_python_vars(os.environ)
    for argv in ([tools.python, "-m", "build", "--sdist", "--outdir", str(out), str(source)],
                 [tools.python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                  str(source)]):
        done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT)
        if done.returncode:
            raise AssertionError(f"{' '.join(argv)} failed:\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
    (sdist,) = out.glob("rocketpy-*.tar.gz")
    (wheel,) = out.glob("rocketpy-*.whl")
    return Dists(sdist, wheel, source)

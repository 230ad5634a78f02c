"""Which model file a ``model`` option names: a path, or an installed model.

A model distribution registers its model file under the entry-point group
:data:`MODELS_GROUP` (``rankseam.learned_models``); the entry point's name is the model's
name and its object is the file's path (a ``str`` or ``os.PathLike``) or a callable with no
arguments returning one::

    [project.entry-points."rankseam.learned_models"]
    locomo = "rankseam_learned_locomo:model_path"

``model = ""`` (the default) is the one installed model; with none installed, or several, a
:class:`~rankseam.errors.ConfigurationError` says what to install, train or name. Loaded
models are kept per (path, size, modification time), so a search does not read the file
again, and a changed file is read again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankseam.errors import ConfigurationError
from rankseam.plugin import option
from rankseam_learned.model import Model, load

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["MODELS_GROUP", "installed_models", "model_option", "resolve_model"]

#: The entry-point group of installed models.
MODELS_GROUP = "rankseam.learned_models"

_LOADED: dict[tuple[str, int, int], Model] = {}
_MAX_LOADED = 8


def model_option() -> Any:
    """The ``model`` option of the reranker and of the decision backend (one meaning)."""
    return option(
        "",
        help="a model file's path or an installed model's name; '' = the one installed model",
    )


def installed_models() -> dict[str, EntryPoint]:
    """The installed models: name -> entry point (not loaded). The installed metadata is read
    here, when a model is looked up, never when the plugin loads (loading plugins reads no
    metadata once the host has cached their entry points)."""
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group=MODELS_GROUP)}


def _installed_path(name: str, entry: EntryPoint) -> Path:
    try:
        target: Any = entry.load()
        if callable(target):
            target = target()
        return Path(os.fspath(target))
    except Exception as exc:  # a broken model distribution: say which
        raise ConfigurationError(
            f"the installed learned model {name!r} ({entry.value}, from "
            f"{getattr(entry.dist, 'name', 'an unknown distribution')}) gives no model file "
            f"path: {exc}; reinstall that distribution"
        ) from exc


def model_path(option: str) -> tuple[Path, str]:
    """The file of the ``model`` option and how to name it in a descriptor."""
    models = installed_models()
    if not option:
        if len(models) == 1:
            ((name, entry),) = models.items()
            return _installed_path(name, entry), name
        if not models:
            raise ConfigurationError(
                "the learned reranker needs a model and none is installed: install the "
                "shipped model for conversational memory (pip install rankseam-learned-locomo), "
                "train one on your own judgements (docs/plugins/learned.md, 'Training'), or "
                "set the option model = '/path/to/model.json'"
            )
        raise ConfigurationError(
            f"several learned models are installed ({', '.join(sorted(models))}); choose one "
            "with the option model = 'NAME' (or a path)"
        )
    if option in models:
        return _installed_path(option, models[option]), option
    path = Path(option).expanduser()
    if not path.exists() and os.sep not in option and not option.endswith(".json"):
        known = ", ".join(sorted(models)) or "none"
        raise ConfigurationError(
            f"no installed learned model is named {option!r} and no such file exists "
            f"(installed models: {known}); give a model name or the path of a model file"
        )
    return path, str(path)


def resolve_model(option: str) -> tuple[Model, str]:
    """The loaded model the ``model`` option names, and its name for descriptors."""
    path, label = model_path(option)
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return load(path), label  # load() says why it cannot be read
    model = _LOADED.get(key)
    if model is None:
        model = load(path)
        if len(_LOADED) >= _MAX_LOADED:
            _LOADED.clear()
        _LOADED[key] = model
    return model, label

"""The schemes and options of the reference, found by listing schemes/ and options/.

Every module in schemes/ declares SCHEME (a declarations.Scheme named after the module),
every module in options/ declares OPTION (a declarations.Option keyed by the module's
name). Adding a module is enough: nothing here names a scheme. They are listed in the
order of their module names.
"""

import functools
import importlib
import pkgutil

from copytask_ref import options as options_package
from copytask_ref import schemes as schemes_package


def _declared(package, attribute, name_of):
    found = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        module = importlib.import_module(package.__name__ + "." + info.name)
        declaration = getattr(module, attribute, None)
        if declaration is None:
            raise RuntimeError("%s declares no %s" % (module.__file__, attribute))
        if name_of(declaration) != info.name:
            raise RuntimeError("%s declares %s %r; a module is named after what it declares"
                               % (module.__file__, attribute, name_of(declaration)))
        found[info.name] = declaration
    return found


@functools.lru_cache(maxsize=None)
def schemes():
    """{name: Scheme}, in the order of the module names."""
    return _declared(schemes_package, "SCHEME", lambda scheme: scheme.name)


@functools.lru_cache(maxsize=None)
def options():
    """{key: Option}, in the order of the module names (the order options attach in)."""
    return _declared(options_package, "OPTION", lambda option: option.key)


def scheme(name):
    if name not in schemes():
        raise ValueError("unknown positional scheme %r; the reference knows %s"
                         % (name, ", ".join(schemes())))
    return schemes()[name]


def options_of(scheme_):
    """The options that attach to this scheme, in attach order."""
    return [option for option in options().values() if option.attaches_to(scheme_)]


def schemes_of(option):
    """The names of the schemes this option attaches to."""
    return [name for name, scheme_ in schemes().items() if option.attaches_to(scheme_)]


def refuse_unsupported(scheme_, options_on, causal):
    """ValueError for what the spec refuses: a causal-only scheme without the mask, an option
    on a scheme it does not attach to (options_on: the keys turned on)."""
    if scheme_.causal_only and not causal:
        raise ValueError("%s is causal only (it needs the causal mask); this model has causal false"
                         % scheme_.name)
    for key in options_on:
        option = options()[key]
        if not option.attaches_to(scheme_):
            raise ValueError("%s needs %s (%s), not %r"
                             % (key, option.requirement, ", ".join(schemes_of(option)), scheme_.name))


def resolve_options(name, given, causal, strict):
    """The keys scheme `name` and its options read, `given` over their defaults (a key given
    as None takes its default, as in older result.json files). strict: a given key that
    neither the scheme nor an option reads is an error (the fixtures' variants); otherwise
    it is ignored (a result.json "model" entry carries every scheme's keys)."""
    scheme_ = scheme(name)
    on = [key for key in options() if given.get(key)]
    refuse_unsupported(scheme_, on, causal)
    defaults = dict(scheme_.defaults)
    for option in options_of(scheme_):
        defaults.update(option.defaults)
    if strict:
        foreign = [key for key in given if key not in defaults]
        if foreign:
            raise ValueError("%s does not read %s" % (name, ", ".join(foreign)))
    resolved = dict(defaults)
    resolved.update({key: value for key, value in given.items() if key in defaults and value is not None})
    return resolved


def options_on(config):
    """The options turned on in this config, in attach order."""
    return [option for key, option in options().items() if config.options.get(key)]

"""Canonical dump of DeepSpeed checkpoint files, made by Python's own unpickler.

usage: ds_canonical_dump.py FILE...

torch.load runs with stand-in modules for deepspeed.* (DeepSpeed itself is
not installed): a meta-path finder creates every deepspeed module on demand
and a stub class for every name looked up in it; a stub class answers
attribute lookups (builtins.getattr(ZeroStageEnum, 'gradients')) with a
member that remembers its name. Each file prints as one line per value:
its key path, its type as module.qualname, and for dicts their keys in
order (OrderedDicts with their _metadata), for objects their __dict__, for
tensors dtype, shape and a SHA-256 of the bytes; scalars by repr. Each
file's lines follow a header line "=== FILE".
"""
import hashlib
import importlib.abc
import importlib.machinery
import sys
import types

import torch


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith('__'):
            raise AttributeError(name)
        member = cls.__new__(cls)
        member.__dict__['_member'] = name
        return member


class _DeepSpeedStubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == 'deepspeed' or name.startswith('deepspeed.'):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def stub(attr, _module=module):
            if attr.startswith('__'):
                raise AttributeError(attr)
            cls = _StubMeta(attr, (object,), {'__module__': _module.__name__})
            setattr(_module, attr, cls)
            return cls

        module.__getattr__ = stub
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _DeepSpeedStubs())


def type_name(v):
    t = type(v)
    return '%s.%s' % (t.__module__, t.__qualname__)


def dump(v, path, out):
    tn = type_name(v)
    if isinstance(v, torch.Tensor):
        c = v.detach().contiguous()
        data = c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b''
        out.append('%s: %s %s %s sha256=%s' % (path, tn, c.dtype, list(c.shape), hashlib.sha256(data).hexdigest()))
    elif isinstance(v, dict):
        out.append('%s: %s keys=%r' % (path, tn, list(v.keys())))
        meta = getattr(v, '_metadata', None)
        if meta is not None:
            dump(meta, path + '._metadata', out)
        for k, x in v.items():
            dump(x, '%s[%r]' % (path, k), out)
    elif isinstance(v, torch.Size):
        out.append('%s: %s %r' % (path, tn, tuple(v)))
    elif isinstance(v, (list, tuple)):
        out.append('%s: %s len=%d' % (path, tn, len(v)))
        for i, x in enumerate(v):
            dump(x, '%s[%d]' % (path, i), out)
    elif isinstance(v, (set, frozenset)):
        out.append('%s: %s %r' % (path, tn, sorted(v)))
    elif tn.startswith('deepspeed.'):
        out.append('%s: %s' % (path, tn))
        for k, x in v.__dict__.items():
            dump(x, '%s.%s' % (path, k), out)
    else:
        out.append('%s: %s %r' % (path, tn, v))


# One process for many files (importing torch is most of the run time): each
# file's dump follows a line "=== FILE".
for f in sys.argv[1:]:
    lines = ['=== ' + f]
    dump(torch.load(f, map_location='cpu'), 'root', lines)
    print('\n'.join(lines))

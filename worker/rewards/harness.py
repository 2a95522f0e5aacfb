"""The two programs of the ``unit_tests`` sandbox: a judge that runs the tests, and the solution.

The completion's code and the row's tests never share an interpreter. Inside the sandbox:

    judge  (python -I -S; runs the row's setup and tests; undumpable; the only writer of results)
      -> solution  (a fresh python -I -S child; runs setup + the completion's code, then answers
                    the judge's calls over two pipes, and nothing else)

A test such as ``assert add(1, 2) == 3`` runs in the judge: ``add`` there is a stand-in that sends
the call to the solution and turns the answer back into plain data (numbers, strings, lists,
tuples, dicts, sets, bytes, None; anything else stays in the solution as a handle). The
comparison, the ``assert`` and the verdict all happen in the judge, so nothing the completion
does in its own process (patching ``sys.exit``/``unittest``/builtins, ``atexit``, ``os._exit``,
printing "passed", writing to any fd, reading ``__main__``) changes a verdict: it can only answer
calls, and a wrong answer fails. The judge reads its tests and the result nonce from stdin (never
argv, which /proc shows to everyone), makes itself undumpable before the solution starts (so a
process of the same uid cannot read its memory or fds through ptrace or /proc), and in the
namespace sandbox runs with no capabilities at all (``setpriv``), so the solution cannot trace it
either. The solution can kill the judge: then the tests never finish and the score is 0.

The tests see only the names they are meant to borrow (the row's entry point, or else the names
they use that neither builtins, the standard library nor the setup define): builtins, modules and
the setup's helpers are always the judge's own, so a completion that redefines ``abs``, ``range``,
``math`` or the setup's ``poly`` changes nothing the tests read (issue 33: such shadowing scored
1.0 on 6 HumanEval problems when every name the completion bound was handed to the tests).
"""

from __future__ import annotations

# Plain data both ways: a JSON tree with tags for what JSON cannot say exactly. Anything that is
# not plain data is kept by its owner and sent as a handle ({"r": n}): the solution's objects
# stay in the solution (``_keep``), and the judge can only send back handles it was given.
CODEC = r'''
import json as _json
_MAX_DEPTH = 60

def _enc(x, keep, depth=0):
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply to send")
    if x is None or x is True or x is False:
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        x = int.__index__(x)
        return x if -2**53 < x < 2**53 else {"i": format(x, "x")}
    if isinstance(x, float):
        return {"f": float.hex(float(x))}
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, complex):
        return {"c": [float.hex(x.real), float.hex(x.imag)]}
    if isinstance(x, (bytes, bytearray)):
        return {"b": bytes(x).hex()}
    for tag, kind in (("t", tuple), ("l", list), ("s", set), ("z", frozenset)):
        if isinstance(x, kind):
            return {tag: [_enc(v, keep, depth + 1) for v in kind.__iter__(x)]}
    if isinstance(x, dict):
        return {"d": [[_enc(k, keep, depth + 1), _enc(v, keep, depth + 1)]
                      for k, v in dict.items(x)]}
    return keep(x)

def _dec(x, find):
    if not isinstance(x, dict):
        return x
    if "i" in x:
        return int(x["i"], 16)
    if "f" in x:
        return float.fromhex(x["f"])
    if "c" in x:
        return complex(float.fromhex(x["c"][0]), float.fromhex(x["c"][1]))
    if "b" in x:
        return bytes.fromhex(x["b"])
    if "d" in x:
        return {_dec(k, find): _dec(v, find) for k, v in x["d"]}
    for tag, kind in (("t", tuple), ("l", list), ("s", set), ("z", frozenset)):
        if tag in x:
            return kind(_dec(v, find) for v in x[tag])
    return find(x)
'''

# The completion's process. Its two pipes to the judge are moved off fds 0/1 (which then point
# at /dev/null, so its prints go nowhere); what it writes on them can only be answers.
SOLUTION = CODEC + r'''
import os as _os, sys as _sys
_rfd, _wfd = _os.dup(0), _os.dup(1)
_null = _os.open("/dev/null", _os.O_RDWR)
_os.dup2(_null, 0)
_os.dup2(_null, 1)
_r = open(_rfd, "r", encoding="utf-8", errors="replace")
_w = open(_wfd, "w", encoding="utf-8")
_kept = []
_MISSING = object()

def _keep(x):
    _kept.append(x)
    return {"r": len(_kept) - 1, "type": type(x).__name__[:60], "callable": callable(x)}

def _find(x):
    return _kept[int(x["r"])]

def _send(reply):
    _w.write(_json.dumps(reply) + "\n")
    _w.flush()

def _why(e):
    try:
        text = str(e)
    except BaseException:
        text = ""
    return [type(e).__name__[:60], text[:300]]

def _load(job):
    ns = {"__name__": "solution"}
    try:
        exec(compile(job["setup"], "<setup>", "exec"), ns)
    except BaseException as e:
        return {"error": ["setup_error"] + _why(e)}
    try:
        code = compile(job["code"], "<completion>", "exec")
    except (SyntaxError, ValueError) as e:
        return {"error": ["syntax_error", "%s (line %s)" % (getattr(e, "msg", e),
                                                            getattr(e, "lineno", "?")), ""]}
    before = dict(ns)
    try:
        exec(code, ns)
    except BaseException as e:
        return {"error": ["code_error"] + _why(e)}
    names = {}
    for k in job["names"]:
        v = ns.get(k, _MISSING)
        if v is not _MISSING and before.get(k, _MISSING) is not v:
            try:
                names[k] = _enc(v, _keep)
            except BaseException:
                names[k] = _keep(v)
    return {"ready": names}

def _answer(req):
    target = _kept[int(req["r"])]
    op = req["op"]
    arg = lambda: _dec(req["arg"], _find)
    if op == "call":
        args, kwargs = arg()
        return target(*args, **kwargs)
    if op == "getattr":
        return getattr(target, str(req["arg"]))
    if op == "getitem":
        return target[arg()]
    if op == "len":
        return len(target)
    if op == "iter":
        return list(target)
    if op == "contains":
        return arg() in target
    if op == "repr":
        return repr(target)[:10000]
    raise ValueError("unknown request")

_send(_load(_json.loads(_r.readline())))
for _line in _r:
    try:
        _reply = {"ok": _enc(_answer(_json.loads(_line)), _keep)}
    except BaseException as e:
        _reply = {"raise": _why(e)}
    _send(_reply)
_os._exit(0)
'''

# The judge: setup and tests run here, against stand-ins for the solution's names.
JUDGE = CODEC + r'''
import builtins as _builtins, ctypes as _ctypes, os as _os, subprocess as _subprocess, sys as _sys
if _ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 0
    _sys.stderr.write("judge: cannot make itself undumpable\n")
    _os._exit(3)
_job = _json.loads(_sys.stdin.read())
_sys.stdin.close()
_nonce, _write, _MAX_REPLY = _job.pop("nonce"), _os.write, 8_000_000

def _emit(kind, **fields):
    _write(1, ("\n" + _nonce + " " + _json.dumps(dict(kind=kind, **fields)) + "\n").encode())

def _why(e):
    return (type(e).__name__ + ": " + str(e))[:300] if str(e) else type(e).__name__

class SolutionGone(BaseException):
    """The solution's process died or broke the protocol: no later call can be answered."""

_remote_types = {}

def _remote_error(name, message):
    cls = getattr(_builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = _remote_types.setdefault(name, type(name, (Exception,), {}))
    try:
        return cls(message) if message else cls()
    except BaseException:
        return _remote_types.setdefault(name, type(name, (Exception,), {}))(message)

class Remote:
    """A stand-in for an object that lives in the solution's process."""
    __slots__ = ("_ref", "_type")

    def __init__(self, ref, type_name):
        self._ref, self._type = ref, type_name

    def __call__(self, *args, **kwargs):
        return _ask("call", self, [list(args), kwargs])

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _ask("getattr", self, name, raw=True)

    def __getitem__(self, key):
        return _ask("getitem", self, key)

    def __len__(self):
        return _ask("len", self, None)

    def __iter__(self):
        return iter(_ask("iter", self, None))

    def __contains__(self, item):
        return _ask("contains", self, item)

    def __repr__(self):
        return _ask("repr", self, None)

def _keep(x):
    if isinstance(x, Remote):
        return {"r": x._ref}
    raise TypeError("cannot send a %s to the solution" % type(x).__name__)

def _find(x):
    return Remote(int(x["r"]), str(x.get("type", "object")))

_child = _subprocess.Popen([_sys.executable, "-I", "-S", "-c", _job.pop("solution")],
                           stdin=_subprocess.PIPE, stdout=_subprocess.PIPE,
                           stderr=_subprocess.DEVNULL, close_fds=True)
_to, _from = _child.stdin, _child.stdout

def _gone():
    try:
        code = _child.wait(timeout=1)
    except _subprocess.TimeoutExpired:
        return SolutionGone("the solution's process stopped answering")
    how = ("killed by signal %d" % -code) if code < 0 else ("exit code %d" % code)
    return SolutionGone("the solution's process exited (%s)" % how)

def _roundtrip(message):
    try:
        _to.write((_json.dumps(message) + "\n").encode())
        _to.flush()
        line = _from.readline(_MAX_REPLY)
    except (OSError, ValueError):
        line = b""
    if not line.endswith(b"\n"):
        raise _gone()
    try:
        return _json.loads(line)
    except ValueError:
        raise SolutionGone("the solution's process broke the protocol") from None

def _ask(op, target, arg, raw=False):
    reply = _roundtrip({"op": op, "r": target._ref,
                        "arg": arg if raw else _enc(arg, _keep)})
    if isinstance(reply, dict) and "ok" in reply:
        return _dec(reply["ok"], _find)
    if isinstance(reply, dict) and isinstance(reply.get("raise"), list):
        name, message = (list(reply["raise"]) + ["", ""])[:2]
        raise _remote_error(str(name)[:60], str(message)[:300])
    raise SolutionGone("the solution's process broke the protocol")

_ns = {"__name__": "tests", "__builtins__": _builtins}
for _m in _job["modules"]:
    try:
        _ns[_m] = __import__(_m)
    except BaseException:
        continue
try:
    exec(compile(_job["setup"], "<setup>", "exec"), _ns)
except BaseException as e:
    _emit("setup_error", error=_why(e))
    _os._exit(0)
try:
    _loaded = _roundtrip({"setup": _job["setup"], "code": _job["code"], "names": _job["names"]})
except SolutionGone as e:
    _loaded = {"error": ["code_error", "SolutionGone", str(e)]}
if isinstance(_loaded, dict) and isinstance(_loaded.get("error"), list):
    _kind, _name, _message = (list(_loaded["error"]) + ["", "", ""])[:3]
    if _kind not in ("setup_error", "syntax_error", "code_error"):
        _kind = "code_error"
    _error = _name if _kind == "syntax_error" else (
        (str(_name) + ": " + str(_message)) if _message else str(_name))
    _emit(_kind, error=str(_error)[:300])
    _os._exit(0)
if not (isinstance(_loaded, dict) and isinstance(_loaded.get("ready"), dict)):
    _emit("code_error", error="SolutionGone: the solution's process broke the protocol")
    _os._exit(0)
for _k in _job["names"]:
    if _k in _loaded["ready"]:
        try:
            _ns[_k] = _dec(_loaded["ready"][_k], _find)
        except BaseException:
            continue
for _i, _t in enumerate(_job["tests"]):
    try:
        exec(compile(_t, "<test %d>" % _i, "exec"), _ns)
        _emit("test", index=_i, passed=True)
    except BaseException as e:
        _emit("test", index=_i, passed=False, error=_why(e))
_emit("done")
_os._exit(0)
'''


def job(code: str, tests: list[str], setup: str, nonce: str, names: list[str],
        modules: list[str]) -> str:
    """The judge's stdin: everything it needs, none of it on a command line.

    ``names`` are the only names the tests take from the completion (the entry point); every
    other name the tests use comes from the judge's own builtins, ``modules`` (standard-library
    modules the tests name without importing, imported fresh by the judge) or the setup.
    """
    import json

    return json.dumps({"nonce": nonce, "setup": setup, "code": code, "tests": tests,
                       "names": names, "modules": modules, "solution": SOLUTION})

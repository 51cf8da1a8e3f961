"""Names pyzmq exports beyond the everyday API, where pyzmq has them: ``ZMQVersionError``,
``DraftFDWarning``, ``zmq_errno``, ``zmq.backend``'s functions, ``zmq.sugar.attrsettr``, and the
``__all__`` lists of ``zmq``, ``zmq.error``, ``zmq.sugar``, ``zmq.backend`` and ``zmq.devices``.

Each is compared with real pyzmq (``libzmq``).  Submodules are reached by the implementation's
own name: under BROKERLESS_TEST_AGAINST=pyzmq, importing "brokerless.sugar" would load a second
copy of zmq.sugar.
"""

from __future__ import annotations

import importlib
import pickle
import types
import warnings
from typing import Any

import pytest
import zmq as libzmq  # always real pyzmq: conftest only swaps the name "brokerless"

import brokerless as zmq


def submodule(impl: types.ModuleType, name: str) -> types.ModuleType:
    return importlib.import_module(f"{impl.__name__}.{name}")


# enum's classes, which pyzmq's ``from .constants import *`` exports by accident.
_ENUM_BASES = {"Enum", "IntEnum", "IntFlag"}

# -- __all__ lists -----------------------------------------------------------------------------


def test_every_name_in_pyzmqs_all_is_exported():
    missing = sorted(set(libzmq.__all__) - _ENUM_BASES - set(zmq.__all__))
    assert not missing
    for name in set(libzmq.__all__) - _ENUM_BASES:
        assert hasattr(zmq, name), name


@pytest.mark.parametrize("module", ["error", "sugar", "backend", "devices"])
def test_every_name_in_a_submodules_all_is_exported(module):
    mine, theirs = submodule(zmq, module), submodule(libzmq, module)
    assert set(theirs.__all__) <= set(mine.__all__)
    for name in theirs.__all__:
        assert hasattr(mine, name), f"{module}.{name}"


def test_zmq_errors_all_is_pyzmqs():
    assert sorted(submodule(zmq, "error").__all__) == sorted(libzmq.error.__all__)


def test_zmq_sugar_has_pyzmqs_submodules_and_device_names():
    sugar = submodule(zmq, "sugar")
    # Not "submod", pyzmq's loop variable, nor "error", pyzmq's ``from zmq import error``:
    # importing the package from zmq.sugar, which the package imports, would be a cycle.
    for name in set(dir(libzmq.sugar)) - {"submod", "error"}:
        if isinstance(getattr(libzmq.sugar, name), types.ModuleType):
            assert isinstance(getattr(sugar, name, None), types.ModuleType), name
    assert sugar.device is zmq.device
    assert sugar.proxy is zmq.proxy
    assert sugar.DeviceType is zmq.DeviceType


def test_zmq_devices_has_device_type_and_proxy():
    devices = submodule(zmq, "devices")
    assert devices.DeviceType is zmq.DeviceType
    assert devices.proxy is zmq.proxy
    assert sorted(devices.__all__) == sorted(submodule(libzmq, "devices").__all__)


# -- ZMQVersionError ---------------------------------------------------------------------------


def test_zmq_version_error_is_exported_where_pyzmq_has_it():
    error, sugar = submodule(zmq, "error"), submodule(zmq, "sugar")
    assert zmq.ZMQVersionError is error.ZMQVersionError is sugar.ZMQVersionError


def test_zmq_version_error_is_a_not_implemented_error_as_in_pyzmq():
    for impl in (zmq, libzmq):
        assert issubclass(impl.ZMQVersionError, NotImplementedError)
        assert not issubclass(impl.ZMQVersionError, impl.ZMQBaseError)


@pytest.mark.parametrize("args", [("4.5",), ("4.5", "Draft sockets")])
def test_zmq_version_error_says_what_needs_which_version(args):
    mine, theirs = zmq.ZMQVersionError(*args), libzmq.ZMQVersionError(*args)
    # pyzmq's text, with brokerless's libzmq version for the one pyzmq's libzmq is.
    assert str(mine) == str(theirs).replace(libzmq.zmq_version(), zmq.zmq_version())
    assert repr(mine) == repr(theirs).replace(libzmq.zmq_version(), zmq.zmq_version())
    assert mine.min_version == theirs.min_version == "4.5"
    assert mine.msg == theirs.msg
    assert mine.version == zmq.zmq_version()
    assert str(mine) == f"{mine.msg} requires libzmq >= 4.5, have {zmq.zmq_version()}"


def test_zmq_version_error_pickles():
    err = pickle.loads(pickle.dumps(zmq.ZMQVersionError("4.5", "Draft sockets")))
    assert (err.min_version, err.msg) == ("4.5", "Draft sockets")


def test_catching_zmq_error_or_version_error_catches_the_zmq_error(make):
    # Where ZMQVersionError is missing, the except clause itself raises AttributeError.
    try:
        make(zmq.PUB).bind("bogus://nowhere")
    except (zmq.ZMQError, zmq.ZMQVersionError) as exc:
        caught: BaseException = exc
    assert isinstance(caught, zmq.ZMQError)
    assert caught.errno == zmq.EPROTONOSUPPORT


# -- DraftFDWarning ----------------------------------------------------------------------------


def test_draft_fd_warning_is_exported_where_pyzmq_has_it():
    error, sugar = submodule(zmq, "error"), submodule(zmq, "sugar")
    assert zmq.DraftFDWarning is error.DraftFDWarning is sugar.DraftFDWarning


def test_draft_fd_warning_is_a_runtime_warning_with_a_default_message():
    for impl in (zmq, libzmq):
        assert issubclass(impl.DraftFDWarning, RuntimeWarning)
        default = impl.DraftFDWarning()
        assert "DraftFDWarning" in str(default)  # says how to silence it
        assert default.args == (str(default),)
        assert impl.DraftFDWarning("custom").args == ("custom",)


def test_draft_fd_warning_can_be_silenced_by_class():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", submodule(zmq, "error").DraftFDWarning)
        warnings.warn(zmq.DraftFDWarning(), stacklevel=1)
    with pytest.warns(zmq.DraftFDWarning):
        warnings.warn(zmq.DraftFDWarning(), stacklevel=1)


# -- zmq_errno ---------------------------------------------------------------------------------


def test_zmq_errno_is_exported_where_pyzmq_has_it():
    assert zmq.zmq_errno is submodule(zmq, "backend").zmq_errno
    assert isinstance(zmq.zmq_errno(), int)


def test_zmq_errno_while_handling_a_failed_call_is_its_errno(make):
    for _ in range(10):
        try:
            make(zmq.PULL).recv(zmq.NOBLOCK)
        except zmq.Again:
            assert zmq.zmq_errno() == zmq.EAGAIN


@pytest.mark.beyond_libzmq  # libzmq's errno is what the last system call left: noise, read late
def test_zmq_errno_outside_an_error_handler_is_zero(make):
    try:
        make(zmq.PUB).bind("bogus://nowhere")
    except zmq.ZMQError:
        assert zmq.zmq_errno() == zmq.EPROTONOSUPPORT
        try:
            raise KeyError("not a ZMQError")
        except KeyError:
            assert zmq.zmq_errno() == 0
    assert zmq.zmq_errno() == 0


# -- zmq.backend -------------------------------------------------------------------------------


def test_backend_has_pyzmqs_functions():
    backend = submodule(zmq, "backend")
    assert backend.proxy is zmq.proxy
    assert backend.proxy_steerable is zmq.proxy_steerable
    assert backend.curve_keypair is zmq.curve_keypair
    assert backend.curve_public is zmq.curve_public
    assert backend.strerror is zmq.strerror
    assert callable(backend.monitored_queue)
    assert backend.IPC_PATH_MAX_LEN == zmq.IPC_PATH_MAX_LEN == libzmq.backend.IPC_PATH_MAX_LEN
    assert backend.PYZMQ_DRAFT_API == zmq.PYZMQ_DRAFT_API == libzmq.backend.PYZMQ_DRAFT_API


def test_backend_curve_functions_make_keys_libzmq_agrees_with():
    backend = submodule(zmq, "backend")
    public, secret = backend.curve_keypair()
    assert len(public) == len(secret) == 40
    assert backend.curve_public(secret) == public == libzmq.curve_public(secret)


# -- zmq.sugar.attrsettr -----------------------------------------------------------------------

IMPLEMENTATIONS = pytest.mark.parametrize("impl", [zmq, libzmq], ids=["tested", "pyzmq"])


def options_class(impl: types.ModuleType) -> type:
    """A user's option holder on ``AttributeSetter``: options stored in a dict."""

    class Options(submodule(impl, "sugar.attrsettr").AttributeSetter):
        store: dict[int, Any]  # declared: assigned as an attribute, not as an option

        def __init__(self) -> None:
            self.store = {}

        def get(self, option: int) -> Any:
            if option == impl.SUBSCRIBE:
                raise impl.ZMQError(impl.EINVAL)  # write-only
            if option == impl.TYPE:
                raise impl.ZMQError(impl.ETERM)
            return self.store[option]

        def set(self, option: int, value: Any) -> None:
            self.store[option] = value

    return Options


@IMPLEMENTATIONS
def test_attrsettr_module_names_attribute_setter(impl):
    attrsettr = submodule(impl, "sugar.attrsettr")
    assert attrsettr.__all__ == ["AttributeSetter"]
    assert submodule(impl, "sugar").attrsettr is attrsettr


@IMPLEMENTATIONS
def test_attribute_setter_maps_option_attributes_to_get_and_set(impl):
    opts = options_class(impl)()
    opts.linger = 5
    opts.SNDHWM = 7
    assert opts.store == {impl.LINGER: 5, impl.SNDHWM: 7}
    assert opts.linger == opts.LINGER == 5
    assert opts.sndhwm == 7
    assert "linger" not in vars(opts)


@IMPLEMENTATIONS
def test_attribute_setter_assigns_declared_and_existing_attributes_normally(impl):
    opts = options_class(impl)()
    opts.store = {impl.LINGER: 1}  # declared in the class
    assert opts.linger == 1
    vars(opts)["extra"] = 0
    opts.extra = 2  # already on the instance
    assert opts.extra == 2
    assert opts.store == {impl.LINGER: 1}


@IMPLEMENTATIONS
def test_attribute_setter_refuses_an_unknown_option(impl):
    opts = options_class(impl)()
    with pytest.raises(AttributeError, match=r"^Options has no such option: NOSUCH$"):
        opts.nosuch = 1
    with pytest.raises(AttributeError, match=r"^Options has no such option: NOSUCH$"):
        _ = opts.nosuch
    assert not hasattr(opts, "nosuch")


@pytest.mark.beyond_pyzmq  # pyzmq takes any constant: ``opts.push = 1`` sets option 8, RATE
def test_attribute_setter_refuses_a_constant_that_is_no_option():
    opts = options_class(zmq)()
    with pytest.raises(AttributeError, match=r"^Options has no such option: PUSH$"):
        opts.push = 1
    assert not hasattr(opts, "eagain")
    assert opts.store == {}


@IMPLEMENTATIONS
def test_attribute_setter_read_of_a_write_only_option_is_attribute_error(impl):
    opts = options_class(impl)()
    assert not hasattr(opts, "subscribe")
    with pytest.raises(impl.ZMQError) as info:
        _ = opts.type  # any other error passes through
    assert info.value.errno == impl.ETERM


@IMPLEMENTATIONS
def test_attribute_setter_hooks_see_the_option_name_and_number(impl):
    seen = []

    class Hooked(options_class(impl)):
        def _set_attr_opt(self, name: str, opt: int, value: Any) -> None:
            seen.append((name, opt, value))

        def _get_attr_opt(self, name: str, opt: int) -> Any:
            return name

    hooked = Hooked()
    hooked.linger = 3
    assert seen == [("LINGER", impl.LINGER, 3)]
    assert hooked.rcvhwm == "RCVHWM"


@IMPLEMENTATIONS
def test_attribute_setter_without_get_and_set_is_not_implemented(impl):
    bare = submodule(impl, "sugar.attrsettr").AttributeSetter()
    with pytest.raises(NotImplementedError):
        _ = bare.linger
    with pytest.raises(NotImplementedError):
        bare.linger = 0

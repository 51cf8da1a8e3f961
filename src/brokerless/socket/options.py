"""Socket options: ``setsockopt``/``getsockopt`` and what sits on them (pyzmq's API).

Every option is checked against the option table (:mod:`brokerless.constants`): its type, its
range, whether this socket type takes it, whether brokerless honours it (options of features
a libzmq build can leave out are EINVAL as in such a build; options brokerless does not honour
read back their default and refuse any other value).  Security options are kept by
:mod:`brokerless.security`; type-specific ones also go to the pattern.  The typed attributes
(``sock.linger``) are descriptors over these two calls (``option_attrs_generated.py``).
"""

from __future__ import annotations

from typing import Any

from ..constants import (
    COMPILED_OUT,
    NOT_HONOURED,
    OPTIONS,
    STRING_OPTIONS,
    OptionSpec,
    PollEvent,
    SocketOption,
    _OptType,
    c_int,
)
from ..errno import EINVAL
from ..error import ZMQError
from ..option_attrs import TopicMethod
from ..patterns import PATTERNS
from ..security import OPTIONS as SECURITY_OPTIONS
from ..security import READ_BACK, get_option, set_option
from .state import SocketState

_O = SocketOption

# Options that only some socket types accept (the pattern lists the ones it takes).
_TYPE_SPECIFIC = frozenset().union(*(cls.options_accepted for cls in PATTERNS.values()))


class OptionsMixin(SocketState):
    """``setsockopt``/``getsockopt`` and their variants (see the module docstring)."""

    __slots__ = ()

    def setsockopt(self, option: int, optval: Any) -> None:
        """Set a socket option (pyzmq's ``setsockopt``; ``set`` is the same)."""
        self._check_alive()
        opt = _known_option(option, optval)
        spec = OPTIONS[opt]
        if not spec.settable:
            raise ZMQError(EINVAL, f"Invalid argument: option {opt.name} is read-only")
        value = _check_value(opt, spec, optval)  # (first: a value of the wrong type is a
        # TypeError, as pyzmq converts it before libzmq looks at the socket type)
        if opt in _TYPE_SPECIFIC and opt not in self._pattern.options_accepted:
            raise ZMQError(
                EINVAL,
                f"Invalid argument: option {opt.name} does not apply to a {self._type.name} socket",
            )
        if opt in NOT_HONOURED and value != spec.default:
            raise ZMQError(EINVAL, _not_honoured(opt))
        if opt in SECURITY_OPTIONS:
            set_option(self._options, opt, value)
            return
        self._options[opt] = value
        if opt in (_O.SNDHWM, _O.RCVHWM):
            self._apply_hwm(opt, value)
        if opt in self._pattern.options_accepted:
            if self._commands:
                self._process_commands()
            self._pattern.xsetsockopt(opt, value)
        self._pipes_changed()  # a subscription, CONFLATE, ... may change how recv may take them

    set = setsockopt

    def getsockopt(self, option: int) -> Any:
        """Read a socket option (pyzmq's ``getsockopt``; ``get`` is the same)."""
        self._check_alive()
        opt = _known_option(option)
        if not OPTIONS[opt].gettable:
            raise ZMQError(EINVAL, f"Invalid argument: option {opt.name} cannot be read")
        if opt == _O.RCVMORE:
            return int(self._rx_parts is not None)
        if opt in (_O.EVENTS, _O.FD):
            self._mailbox.use_fd()  # whoever asks is about to wait on the descriptor
            if opt == _O.FD:
                return self._mailbox.fileno()
            self._mailbox.clear_fd()  # an event loop woke on it: reset before looking
            return PollEvent(self._events())
        if opt == _O.TYPE:
            return self._type
        if opt in READ_BACK:
            return get_option(self._options, opt)
        return self._options[opt]

    get = getsockopt

    def setsockopt_string(self, option: int, optval: str, encoding: str = "utf-8") -> None:
        """Set a text option from ``str``, encoded with ``encoding``."""
        if not isinstance(optval, str):
            raise TypeError(f"setsockopt_string needs a str, not {type(optval).__name__}")
        self.setsockopt(option, optval.encode(encoding))

    set_string = setsockopt_unicode = setsockopt_string

    def getsockopt_string(self, option: int, encoding: str = "utf-8") -> str:
        """Read a bytes option as ``str``, decoded with ``encoding``."""
        opt = _known_option(option)
        if opt._opt_type is not _OptType.bytes:
            raise TypeError(f"option {opt.name} holds an int, not text")
        value: bytes = self.getsockopt(opt)
        return value.decode(encoding)

    get_string = getsockopt_unicode = getsockopt_string

    @TopicMethod
    def subscribe(self, topic: str | bytes) -> None:
        """Receive messages that start with ``topic`` (SUB, XSUB; ``str`` is UTF-8 encoded)."""
        if isinstance(topic, str):
            topic = topic.encode()
        self.setsockopt(_O.SUBSCRIBE, topic)

    @TopicMethod
    def unsubscribe(self, topic: str | bytes) -> None:
        """Undo one ``subscribe(topic)``."""
        if isinstance(topic, str):
            topic = topic.encode()
        self.setsockopt(_O.UNSUBSCRIBE, topic)

    def _apply_hwm(self, opt: SocketOption, value: int) -> None:
        for pipe in self._pipes:
            if opt == _O.SNDHWM:
                pipe.set_writer_hwm(value)
            else:
                pipe.set_reader_hwm(value)

    def get_hwm(self) -> int:
        """The high-water mark: SNDHWM (the socket's are equal unless set apart)."""
        hwm: int = self.getsockopt(_O.SNDHWM)
        return hwm

    def set_hwm(self, value: int) -> None:
        """Set SNDHWM and RCVHWM both (for connections made afterwards, as in libzmq)."""
        self.setsockopt(_O.SNDHWM, value)
        self.setsockopt(_O.RCVHWM, value)

    hwm = property(get_hwm, set_hwm, doc="SNDHWM when read; SNDHWM and RCVHWM when set.")


def _known_option(option: int, optval: Any = 0) -> SocketOption:
    """The option ``option`` names, if brokerless has it; else EINVAL saying why (or, as
    pyzmq, TypeError for a non-int value of a number nobody knows)."""
    c_int(option, "a socket option (zmq.LINGER, ...)")
    try:
        opt = SocketOption(option)
    except ValueError:
        if not isinstance(optval, int):
            raise TypeError(
                f"unknown socket option {option!r}: only int values go through unchecked"
            ) from None
        raise ZMQError(EINVAL, f"Invalid argument: unknown socket option {option!r}") from None
    if opt not in OPTIONS:
        if opt in COMPILED_OUT:
            raise ZMQError(EINVAL, f"Invalid argument: {opt.name} {COMPILED_OUT[opt]}")
        if opt in NOT_HONOURED:
            raise ZMQError(EINVAL, _not_honoured(opt))
        raise ZMQError(
            EINVAL, f"Invalid argument: option {opt.name} is not supported by brokerless"
        )
    return opt


def _check_int(opt: SocketOption, spec: OptionSpec, value: Any) -> int:
    """``value`` as libzmq keeps it for ``opt`` (see :class:`~brokerless.constants.OptionSpec`)."""
    number = c_int(value, f"the value of option {opt.name}", spec.bits)
    if spec.flag:
        return int(number != 0)
    if spec.step != 1:
        number = int(number / spec.step) * spec.step  # (cut toward zero, as C's division)
    if (spec.low is not None and number < spec.low) or (
        spec.high is not None and number > spec.high
    ):
        bounds = f"at least {spec.low}" if spec.high is None else f"{spec.low} to {spec.high}"
        raise ZMQError(EINVAL, f"Invalid argument: {opt.name} takes {bounds}, not {number}")
    return number


def _not_honoured(opt: SocketOption) -> str:
    return f"Invalid argument: {opt.name}: brokerless does not support {NOT_HONOURED[opt]}"


def _check_value(opt: SocketOption, spec: OptionSpec, value: Any) -> Any:
    if spec.kind is int:
        return _check_int(opt, spec, value)
    if not isinstance(value, bytes):  # (pyzmq's too: a bytearray or a view is a TypeError)
        if isinstance(value, str) and opt in STRING_OPTIONS:
            raise TypeError(f"unicode not allowed for {opt.name}, use setsockopt_string")
        raise TypeError(f"option {opt.name} takes bytes, not {type(value).__name__}")
    data = bytes(value)
    if opt == _O.ROUTING_ID and not 0 < len(data) <= 255:
        raise ZMQError(EINVAL, "Invalid argument: ROUTING_ID must be 1 to 255 bytes")
    if opt == _O.CONNECT_ROUTING_ID and not data:  # (a local name: no upper bound, as libzmq)
        raise ZMQError(EINVAL, "Invalid argument: CONNECT_ROUTING_ID must not be empty")
    return data

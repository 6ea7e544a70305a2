"""The placeholder the suite's import rewrite binds a public DBOS name to when dbos_agent
lacks it: the import error it stands for is raised where the name is used (called,
subclassed, read from), so only the tests that use the name fail."""

from typing import Any, NoReturn


class _Absent:
    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _fail(self) -> NoReturn:
        module, _, name = ("dbos_agent." + self._name).rpartition(".")
        raise ImportError(f"cannot import name {name!r} from {module!r}")

    def __repr__(self) -> str:
        return f"<{self._name}: absent from dbos_agent>"

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._fail()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            # typing and inspect probe dunders with hasattr, which expects AttributeError.
            raise AttributeError(attr)
        self._fail()

    def __mro_entries__(self, bases: Any) -> NoReturn:
        self._fail()

    def __getitem__(self, item: Any) -> "_Absent":
        # Annotations subscript types at definition time (Foo[int]); that alone is no use.
        return self


def absent(name: str) -> Any:
    return _Absent(name)

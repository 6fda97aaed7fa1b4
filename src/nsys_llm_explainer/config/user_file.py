"""Read a small option file given by the user (``--categories``, ``--phase-map``) with a size cap, and decode its
JSON or YAML within bounds; every refusal is one :class:`~nsys_llm_explainer.errors.OptionError` line naming the
option and the file, never quoting its text. The limits and why: docs/SECURITY.md, "1. The input is read, never
written" (option files).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple, Union

from ..errors import OptionError

#: largest option file read (rule and phase-map files are a few kB)
MAX_BYTES = 8 << 20
#: largest YAML option file parsed (PyYAML's safe loader is pure Python: about a second per MiB at worst)
YAML_MAX_BYTES = 1 << 20
#: deepest nesting of lists / objects in an option file (real files: 3 or 4)
MAX_DEPTH = 64
#: most values (scalars, lists, objects; YAML aliases expanded) in an option file (real files: hundreds)
MAX_VALUES = 50_000


class Unreadable(Exception):
    """Why an option file cannot be read (``file not found``, ``not a regular file``, …): one short phrase."""


def read_text(path: Union[str, os.PathLike]) -> str:
    """The UTF-8 text of ``path``; :class:`Unreadable` when it is missing, not a regular file, larger than
    :data:`MAX_BYTES` or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Unreadable("file not found") from None
    except OSError as exc:
        raise Unreadable(f"cannot read the file ({exc.strerror or exc})") from None
    except ValueError:   # a NUL byte in the name (the Python API can be given one)
        raise Unreadable("a file name cannot hold a NUL byte") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > MAX_BYTES:
            raise Unreadable(f"the file is {st.st_size:,} bytes; option files are limited to {MAX_BYTES:,}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read the file ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise Unreadable(f"the file is larger than {MAX_BYTES:,} bytes, the limit for option files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def refusal(option: str, path: Optional[Union[str, os.PathLike]], detail: str) -> OptionError:
    """``<option> <path>: <detail>`` (a file), ``<option>: <detail>`` (no file)."""
    return OptionError(option, detail, ": ") if path is None else OptionError(option, f"{path}: {detail}")


def _too_deep(option: str, path: Optional[str]) -> OptionError:
    return refusal(option, path, f"nested deeper than {MAX_DEPTH} levels, the limit for option files")


def _too_big(option: str, path: Optional[str]) -> OptionError:
    return refusal(option, path, f"more than {MAX_VALUES:,} values (lists, objects and scalars, YAML aliases "
                   "expanded), the limit for option files")


def check_shape(data: object, option: str, path: Optional[str] = None) -> object:
    """``data`` (decoded JSON) when it is at most :data:`MAX_DEPTH` deep and holds at most :data:`MAX_VALUES`
    values; :class:`OptionError` naming ``option`` and ``path`` otherwise (iterative: no recursion)."""
    stack: List[Tuple[object, int]] = [(data, 1)]
    count = 0
    while stack:
        v, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise _too_big(option, path)
        if isinstance(v, (list, dict)):
            if depth > MAX_DEPTH:
                raise _too_deep(option, path)
            items = v.values() if isinstance(v, dict) else v
            stack.extend((x, depth + 1) for x in items)
    return data


def load_json(text: str, option: str, path: Optional[str] = None) -> object:
    """JSON within the limits (:class:`OptionError` past one); ``json.JSONDecodeError`` (a ``ValueError``) for
    invalid JSON, as ``json.loads``."""
    try:
        data = json.loads(text)
    except RecursionError:   # nesting past the interpreter's own limit: far past ours
        raise _too_deep(option, path) from None
    except json.JSONDecodeError:
        raise
    except ValueError as e:   # an integer of more digits than Python converts (4,300)
        raise refusal(option, path, f"not valid JSON ({scrub(str(e))})") from None
    return check_shape(data, option, path)


def _children(node: Any) -> List[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: Any, option: str, path: Optional[str]) -> None:
    """Values and depth of the composed YAML document with every alias expanded, computed once per node (the
    document is a graph: an alias is the anchored node itself), without recursion; a cycle is refused."""
    size: Dict[int, Tuple[int, int]] = {}   # id(node) → (expanded values, expanded depth)
    on_path = set()
    stack: List[Tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = [size[id(c)] for c in _children(node)]
            n = 1 + sum(k[0] for k in kids)
            d = 1 + max((k[1] for k in kids), default=0)
            if n > MAX_VALUES:
                raise _too_big(option, path)
            if d > MAX_DEPTH:
                raise _too_deep(option, path)
            size[key] = (n, d)
            on_path.discard(key)
        elif key in on_path:
            raise refusal(option, path, "a YAML alias refers to a node that contains it (a cycle); option files "
                          "must be plain data")
        elif key not in size:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node))


def scrub(problem: str) -> str:
    """A parser's reason without the file's text: quoted excerpts longer than one character are dropped
    (token names such as ``'<scalar>'`` stay)."""
    first = problem.strip().splitlines()[0] if problem.strip() else ""
    return re.sub(r"'(?!<[a-z ]+>')[^'\n]{2,}'", "'…'", first)[:200]


def load_yaml(text: str, option: str, path: Optional[str] = None, what: str = "YAML") -> object:
    """YAML (safe loader) within the limits; :class:`OptionError` for invalid YAML (``<option> <path>: not valid
    <what> (reason at line N)``) or one past a limit; ``ImportError`` when PyYAML is not installed."""
    import yaml

    size = len(text.encode("utf-8", "surrogatepass"))
    if size > YAML_MAX_BYTES:
        raise refusal(option, path, f"the file is {size:,} bytes; YAML option files are limited to "
                      f"{YAML_MAX_BYTES:,} (JSON ones to {MAX_BYTES:,})")

    class Bounded(yaml.SafeLoader):
        depth = 0
        nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            self.nodes += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _too_deep(option, path)
                if self.nodes > MAX_VALUES:
                    raise _too_big(option, path)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader: Any = None
    try:
        loader = Bounded(text)   # reads the text: a character YAML does not take is an error here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node, option, path)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        where = f" at line {e.problem_mark.line + 1}" if e.problem_mark is not None else ""
        reason = scrub(e.problem or e.context or "") or "parse error"
        raise refusal(option, path, f"not valid {what} ({reason}{where})") from None
    except yaml.YAMLError as e:
        raise refusal(option, path, f"not valid {what} ({scrub(str(e)) or 'parse error'})") from None
    except RecursionError:
        raise _too_deep(option, path) from None
    except (ValueError, OverflowError) as e:   # a value the constructors refuse (an integer of > 4,300 digits)
        raise refusal(option, path, f"not valid {what} ({scrub(str(e)) or type(e).__name__})") from None
    finally:
        if loader is not None:
            loader.dispose()

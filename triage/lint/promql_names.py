"""The metric names a PromQL expression asks for, read by a small tokenizer (no PromQL evaluation).

Skipped: string literals, label matchers (except ``{__name__="x"}``), range/subquery brackets, numbers and
durations, Grafana variables (``$x``, ``${x}``, ``[[x]]``), keywords and aggregation operators, function names
(an identifier followed by ``(``), and the label lists after by/without/on/ignoring/group_left/group_right.
"""

from __future__ import annotations

import re

IDENT_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
NUMBER_RE = re.compile(r"[0-9.][0-9A-Za-z_.]*|0[xX][0-9A-Fa-f]+")
VARIABLE_RE = re.compile(r"\$\{[^}]*\}|\$[A-Za-z0-9_]+|\[\[[^\]]*\]\]")
LABEL_LIST_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
            "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
            "quantile", "limitk", "limit_ratio"} | LABEL_LIST_WORDS
MATCHER_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\"(?:[^\"\\]|\\.)*\")\s*(=~|!~|!=|=)\s*"
                        r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*,?")

QUOTED_NAME_RE = re.compile(r"\s*(\"(?:[^\"\\]|\\.)*\")\s*(?:,|(?=\}))")


def _skip_string(text: str, i: int) -> int:
    """The index after the string literal opening at ``i`` (an unclosed one runs to the end)."""
    quote = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and quote != "`":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return len(text)


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    return body if literal[0] == "`" else re.sub(r"\\(.)", r"\1", body)


def _matchers(text: str, i: int, names: list[str]) -> int:
    """Read ``{…}`` from ``i`` (at ``{``); an exact ``__name__`` matcher names a metric. Returns the index after."""
    j = i + 1
    while j < len(text):
        if text[j] == "}":
            return j + 1
        quoted = QUOTED_NAME_RE.match(text, j)
        if quoted is not None:  # Prometheus 3's quoted metric name: {"my.metric", job="x"}
            names.append(_unquote(quoted.group(1)))
            j = quoted.end()
            continue
        found = MATCHER_RE.match(text, j)
        if found is None:  # not a matcher we understand: skip to the closing brace, strings included
            while j < len(text) and text[j] != "}":
                j = _skip_string(text, j) if text[j] in "\"'`" else j + 1
            continue
        label, op, value = found.groups()
        if label.strip('"') == "__name__" and op == "=":
            names.append(_unquote(value))
        j = found.end()
    return j


def _label_list(text: str, i: int) -> int:
    """Skip whitespace and a parenthesised label list after by/on/…; the index after it (or ``i``)."""
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if j < len(text) and text[j] == "(":
        close = text.find(")", j)
        return len(text) if close < 0 else close + 1
    return i


def metric_names(expr: str) -> list[str]:
    """Every metric name ``expr`` selects, in order of appearance, each once."""
    names: list[str] = []
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch in "\"'`":
            i = _skip_string(expr, i)
        elif ch == "#":  # a comment runs to the end of the line
            end = expr.find("\n", i)
            i = n if end < 0 else end
        elif ch == "{":
            i = _matchers(expr, i, names)
        elif ch == "[":
            found = VARIABLE_RE.match(expr, i)
            close = expr.find("]", i) if found is None else found.end() - 1
            i = n if close < 0 else close + 1
        elif ch == "$":
            found = VARIABLE_RE.match(expr, i)
            i = found.end() if found else i + 1
        elif ch.isdigit() or (ch == "." and i + 1 < n and expr[i + 1].isdigit()):
            found = NUMBER_RE.match(expr, i)
            i = found.end() if found else i + 1
        elif (found := IDENT_RE.match(expr, i)) is not None:
            word, i = found.group(), found.end()
            rest = i
            while rest < n and expr[rest].isspace():
                rest += 1
            if word in LABEL_LIST_WORDS:
                i = _label_list(expr, i)
            elif word.lower() in KEYWORDS or (rest < n and expr[rest] == "("):
                continue  # an operator, a keyword or a function name
            elif i > 1 and expr[found.start() - 1] == "@":
                continue
            else:
                names.append(word)
        else:
            i += 1
    return list(dict.fromkeys(names))


def label_values_query(query: str) -> list[str]:
    """Metric names of a Grafana template query: ``label_values(metric{…}, label)`` names ``metric``;
    ``label_values(label)`` and ``metrics(regex)`` name none; ``query_result(expr)`` is read as PromQL."""
    text = query.strip()
    found = re.fullmatch(r"label_values\s*\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)", text, re.DOTALL)
    if found:
        return metric_names(found.group(1))
    if re.fullmatch(r"(label_values|metrics|label_names)\s*\(.*\)", text, re.DOTALL):
        return []
    found = re.fullmatch(r"query_result\s*\((.*)\)", text, re.DOTALL)
    return metric_names(found.group(1) if found else text)

"""Helpers shared by the tessera Prometheus checks: PromQL metric-name
extraction, Grafana variable substitution, and walking dashboards/rules."""
import json
import re

import yaml

KEYWORDS = {
    "and", "or", "unless", "bool", "by", "without", "on", "ignoring",
    "group_left", "group_right", "offset", "inf", "nan", "atan2", "start", "end",
}
# What the Grafana macros and template variables become when a query is run
# outside Grafana. Variables are all "All" (regex .*), as a fresh dashboard.
MACROS = [
    ("$__range_s", "3600"),
    ("${__range_s}", "3600"),
    ("$__range_ms", "3600000"),
    ("$__range", "1h"),
    ("${__range}", "1h"),
    ("$__rate_interval", "1m"),
    ("${__rate_interval}", "1m"),
    ("$__interval_ms", "15000"),
    ("$__interval", "15s"),
    ("${__interval}", "15s"),
]
VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def substitute(expr, values=None):
    """Replace Grafana macros, then every template variable by its value
    (default `.*`, Grafana's allValue in tessera's dashboards)."""
    values = values or {}
    for k, v in MACROS:
        expr = expr.replace(k, v)
    return VAR.sub(lambda m: values.get(m.group(1) or m.group(2) or m.group(3), ".*"), expr)


def metric_names(expr):
    """Metric names a PromQL expression selects (not functions, keywords,
    label names or numbers)."""
    names = set(re.findall(r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"', expr))
    s = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", s)
    for m in re.finditer(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)", s):
        word = m.group(1)
        rest = s[m.end():]
        if re.match(r"\s*\(", rest) or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def label_values_selector(query):
    """`label_values(metric{...}, label)` -> `metric{...}`; `label_values(label)`
    -> None; anything else is returned as a PromQL query."""
    m = re.match(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", query, re.S)
    if m:
        return m.group(1)
    if re.match(r"^\s*label_values\(\s*\w+\s*\)\s*$", query):
        return None
    m = re.match(r"^\s*query_result\((.*)\)\s*$", query, re.S)
    if m:
        return m.group(1)
    return query


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def dashboard_queries(path):
    """(key, expr) for every panel target and query variable of a dashboard.
    key: '<uid>/<panel title>#<refId>' or '<uid>/$<variable>'."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    out = []
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        sel = label_values_selector(q or "")
        if sel:
            out.append((f"{d['uid']}/${v['name']}", sel))
    for p in walk_panels(d.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append((f"{d['uid']}/{p.get('title')}#{t.get('refId')}", t["expr"]))
    return out


def load_rules(paths):
    """[(kind, name, expr, rule)] for every rule of the given files."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                if "alert" in r:
                    out.append(("alert", r["alert"], r["expr"], r))
                else:
                    out.append(("record", r["record"], r["expr"], r))
    return out

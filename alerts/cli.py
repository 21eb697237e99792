"""``hotspan alerts``: ``rules SLO.yaml`` writes Prometheus alerting rules; ``check SLO.yaml`` validates a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from alerts.config import AlertsConfigError, load_alerts_config
from alerts.rules import render_rules


def add_alerts_parser(commands: argparse._SubParsersAction) -> None:
    """Add the ``alerts`` subcommand and its own subcommands to ``hotspan``'s parser."""
    alerts = commands.add_parser("alerts", help="SLO alerting: generate Prometheus rules, validate SLO files")
    actions = alerts.add_subparsers(dest="alerts_command", required=True)
    rules = actions.add_parser("rules", help="write multi-window burn-rate alerting rules for Prometheus")
    rules.add_argument("slo_file", type=Path, help="SLO file (YAML, see alerts.config)")
    rules.add_argument("-o", "--output", type=Path, help="write here instead of standard output")
    check = actions.add_parser("check", help="validate an SLO file, listing every problem")
    check.add_argument("slo_file", type=Path)


def run_alerts_command(args: argparse.Namespace) -> int:
    """Run ``hotspan alerts ...``; exit status 0, or 2 for an invalid SLO file (problems on stderr)."""
    try:
        config = load_alerts_config(args.slo_file)
    except AlertsConfigError as exc:
        print(f"hotspan alerts: {exc}", file=sys.stderr)
        return 2
    if args.alerts_command == "check":
        print(f"{args.slo_file}: {len(config.slos)} SLO(s), valid")
        return 0
    text = render_rules(config)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0

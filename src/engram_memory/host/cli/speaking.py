"""The command line in the person's language: `--lang` (anywhere on the line) or the POSIX locale
variables choose it before anything is parsed, so help and usage errors are translated too.

Help texts are English where they are declared (docstrings, `help=`); the command tree Typer builds is
walked once per run and each text replaced by its translation. The Click that Typer carries words its
own parts in English literals: its help formatter is given translated headings, and its usage errors
are read by their (stable) English shapes and said again from the catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engram_memory.host.language.catalogue import N_, _
from engram_memory.host.language.choice import Language, from_environment, requested

LANG_FLAG = "--lang"
# Click's own headings, marked for the catalogue: the help formatter looks each one up as it writes it.
HEADINGS = (N_("Usage: "), N_("Options"), N_("Commands"), N_("Arguments"), N_("Show this message and exit."))
_EXTRAS = re.compile(r"\s*\[(env var: (?P<var>[^\]]*)|default: (?P<default>[^\]]*)|(?P<required>required))\]\s*$")
# Click's usage errors, by the English it words them in (typer/_click/exceptions.py, core.py, types.py).
USAGE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.DOTALL), message)
    for pattern, message in (
        (r"No such command '(?P<name>.*)'\.", N_("No such command '{name}'.")),
        (
            r"No such option: (?P<name>\S+) \(Possible options: (?P<choices>.*)\)",
            N_("No such option: {name} (possible options: {choices})"),
        ),
        (
            r"No such option: (?P<name>\S+) Did you mean (?P<choices>.*)\?",
            N_("No such option: {name}. Did you mean {choices}?"),
        ),
        (r"No such option: (?P<name>.*)", N_("No such option: {name}")),
        (r"Missing option (?P<name>.*)\.", N_("Missing option {name}.")),
        (r"Missing argument (?P<name>.*)\.", N_("Missing argument {name}.")),
        (r"Missing command\.", N_("Missing command.")),
        (r"Option (?P<name>\S+) requires an argument\.", N_("Option {name} requires an argument.")),
        (r"Option (?P<name>\S+) does not take a value\.", N_("Option {name} does not take a value.")),
        (r"Got unexpected extra arguments? \((?P<values>.*)\)", N_("Got unexpected extra arguments ({values})")),
        (r"Invalid value for (?P<name>[^:]+): (?P<why>.*)", N_("Invalid value for {name}: {why}")),
    )
)
# What was wrong with a value, as Click (its types) or pydantic (Typer's checks) words it.
VALUE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.DOTALL), message)
    for pattern, message in (
        (r"(?:Value error, )?(?P<value>.*) is not one of (?P<choices>.*)\.", N_("{value} is not one of {choices}.")),
        (r"(?P<value>.*) is not a valid integer\.", N_("{value} is not a valid integer.")),
        (r"(?P<value>.*) is not a valid float\.", N_("{value} is not a valid number.")),
        (r"(?P<value>.*) is not a valid boolean\.", N_("{value} is not a valid boolean.")),
        (r"(?P<value>.*) is not in the range (?P<range>.*)\.", N_("{value} is not in the range {range}.")),
        (r"Input should be a valid integer.*", N_("a whole number is needed.")),
        (r"Input should be a valid number.*", N_("a number is needed.")),
        (r"Input should be a valid boolean.*", N_("true or false is needed.")),
        (r"Input should be greater than or equal to (?P<least>\S+)", N_("it must be at least {least}.")),
        (r"Input should be less than or equal to (?P<most>\S+)", N_("it must be at most {most}.")),
        (r"(?P<value>.*) is not a valid (?P<kind>.*)\.", N_("{value} is not a valid {kind}.")),
    )
)


class LanguageRequestError(ValueError):
    pass


def chosen_language(arguments: list[str], environ: Mapping[str, str]) -> tuple[Language, list[str]]:
    """The language asked for and the command line without `--lang`; LanguageRequestError names a value
    no catalogue serves, or a flag given no value."""
    rest: list[str] = []
    asked: str | None = None
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--":
            rest.extend(arguments[index:])
            break
        if argument == LANG_FLAG:
            if index + 1 >= len(arguments):
                raise LanguageRequestError("")
            asked = arguments[index + 1]
            index += 2
            continue
        if argument.startswith(LANG_FLAG + "="):
            asked = argument.split("=", 1)[1]
        else:
            rest.append(argument)
        index += 1
    if asked is None:
        return from_environment(environ), rest
    try:
        return requested(asked), rest
    except ValueError:
        raise LanguageRequestError(asked) from None


def _said_again(message: str, table: Sequence[tuple[re.Pattern[str], str]], inner: Callable[[str], str]) -> str | None:
    for pattern, template in table:
        found = pattern.fullmatch(message)
        if found is not None:
            parts = {name: inner(value) if name == "why" else value for name, value in found.groupdict().items()}
            return _(template).format(**parts)
    return None


def usage_error(message: str) -> str:
    """A usage error of Click's, in the person's language (as Click worded it when its shape is new)."""

    def value_error(text: str) -> str:
        return _said_again(text, VALUE_ERRORS, str) or text

    return _said_again(message.strip(), USAGE_ERRORS, value_error) or message


def _help_line(text: str) -> str:
    """A help column: its text translated, and Click's bracketed notes after it too."""
    notes: list[str] = []
    while (found := _EXTRAS.search(text)) is not None:
        if found["var"] is not None:
            notes.insert(0, _("[env var: {var}]").format(var=found["var"]))
        elif found["default"] is not None:
            notes.insert(0, _("[default: {default}]").format(default=found["default"]))
        else:
            notes.insert(0, _("[required]"))
        text = text[: found.start()]
    return "  ".join([_(text), *notes]) if text else "  ".join(notes)


def _translating_context(context_class: Any) -> Any:
    """The command's context class, with a help formatter that words Click's own parts in the catalogue."""
    base_formatter = context_class.formatter_class

    class Formatter(base_formatter):  # type: ignore[misc, valid-type]
        def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
            super().write_usage(prog, args, _("Usage: ") if prefix is None else prefix)

        def write_heading(self, heading: str) -> None:
            super().write_heading(_(heading))

        def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
            super().write_dl([(term, _help_line(text)) for term, text in rows], col_max, col_spacing)

    return type("TranslatingContext", (context_class,), {"formatter_class": Formatter})


def translate_help(command: Any, context_class: Any = None) -> None:
    """Every help text of the tree, in place (Typer builds a fresh tree for each run)."""
    context_class = context_class or _translating_context(command.context_class)
    command.context_class = context_class
    for name in ("help", "short_help", "epilog"):
        text = getattr(command, name, None)
        if text:
            setattr(command, name, _(text))
    for parameter in command.params:
        text = getattr(parameter, "help", None)  # options, and Typer's arguments
        if isinstance(text, str) and text:
            parameter.help = _(text)
    for child in getattr(command, "commands", {}).values():
        translate_help(child, context_class)


def help_texts(command: Any) -> list[str]:
    """What `translate_help` translates, for the catalogue's extraction."""
    texts = [text for name in ("help", "short_help", "epilog") if (text := getattr(command, name, None))]
    texts += [text for p in command.params if isinstance(text := getattr(p, "help", None), str) and text]
    for child in getattr(command, "commands", {}).values():
        texts += help_texts(child)
    return texts

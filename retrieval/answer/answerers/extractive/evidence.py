"""What kind of evidence a question needs (pure functions): expected answer type, specific terms.

Two generic signals that a passage does not answer a question, independent of how similar it reads:

- **Expected answer type.** A question that asks for a quantity ("how high", "how long", "what is the
  maximum speed", "how much does it cost", "which frequencies") can only be answered by text that
  states one: a number, and — when the question names the measure — a compatible unit (knots/mph for
  a speed, feet/miles for a height or distance, minutes/hours/days/months for a time, pounds for a
  weight, MHz/kHz for a radio frequency, degrees for a temperature, $/dollars for a fee). Section
  references ("§ 91.185", "part 61", "(b)(2)") and list numbers are not quantities.
- **Specific terms.** Names and designators in a question (capitalised words other than the first,
  designators such as "172S" or "PA-28") are what make it specific. When the
  collection never uses one of them (document frequency 0), the documents almost surely do not
  cover the question. Everyday words are not counted: a paraphrase ("crowded town") legitimately
  uses words the handbook does not.

Limits, on purpose: question words are matched in English, and "frequency" is read as a radio
frequency (a question meaning "how often" should say so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import takewhile

from retrieval.answer.answerers.lexical import stem
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize

_Q_TOKEN = re.compile(r"[a-z0-9$%°][a-z0-9'-]*")
NOUN_WINDOW = 4  # a measure noun counts when it follows "what"/"which"/"maximum"... within this many words


@dataclass(frozen=True)
class Expected:
    """A quantity is expected; ``units`` are the acceptable unit classes (empty: any number will do)."""

    units: frozenset[str]
    cue: str  # the words of the question that made it a quantity question
    counted: str = ""  # "how many takeoffs": the (stemmed) thing counted, which the number must count

    def describe(self) -> str:
        if self.counted:
            return f"a number of {self.counted}"
        return " or ".join(sorted(self.units)) if self.units else "a number"


def expected_answer(question: str, profile: Profile = DEFAULT_PROFILE) -> Expected | None:
    """The quantity a question asks for, or None when it does not ask for one."""
    words = _Q_TOKEN.findall(normalize(question))
    units: set[str] = set()
    cues: list[str] = []  # none: not a quantity question
    counted = ""
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word in profile.how_openers and nxt in profile.how_words:
            cues.append(f"how {nxt}")
            kinds = profile.how_words[nxt]
            if kinds:
                units.update(kinds)
            elif nxt in profile.amount_words and any(v in words for v in profile.money_verbs):
                units.add("money")
            elif nxt in profile.count_words:
                phrase = counted_phrase(words[i + 2:], profile)
                unit = next((c for c, ws in profile.units.items() if phrase and phrase[0] in ws), None)
                if unit is not None:
                    units.add(unit)  # "how many days" is a time
                elif phrase:
                    counted = stem(phrase[-1])  # "how many backup fuses": fuses
        elif word in profile.wh_words or word in profile.extreme_words:
            for j in range(i + 1, min(i + 1 + NOUN_WINDOW, len(words))):
                if words[j] in profile.measure_nouns:
                    cues.append(" ".join(words[i:j + 1]))
                    units.update(profile.measure_nouns[words[j]] or ())
                    break
    if not cues:
        return None
    return Expected(frozenset(units), "; ".join(cues), counted)


COUNTED_WORDS = 3  # "how many spare light bulbs": at most this many words name what is counted


def counted_phrase(words: list[str], profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The words after "how many" that name what is counted, up to the first stopword."""
    return list(takewhile(lambda w: w not in profile.stopwords, words[:COUNTED_WORDS]))


def _unit_after(tokens: list[str], i: int, profile: Profile) -> str | None:
    """The unit class stated by the tokens right after position ``i`` (a number), if any."""
    for width in (3, 2, 1):  # longest first: "degrees celsius" before "degrees"
        phrase = " ".join(tokens[i + 1:i + 1 + width]).rstrip(".,;:)")
        for cls, words in profile.units.items():
            if phrase in words:
                return cls
    return None


def quantities(text: str, profile: Profile = DEFAULT_PROFILE) -> set[str]:
    """The kinds of quantity a text states: unit classes ("speed", "length", ...) with a number in
    front, plus "number" when it states any number that is not a reference (section, part, form)."""
    norm = normalize(text)
    out: set[str] = set()
    # glue "2 °C" / "2°C" / "$ 50" into separable tokens
    norm = re.sub(r"(\d)([°%])", r"\1 \2", norm)
    norm = _TOLERANCE.sub(r"\1 / \2", norm)  # "+10/-5 knots": two values
    tokens = norm.split()
    for i, tok in enumerate(tokens):
        core = tok.strip("(),;:\"'")
        if _SIGNED.fullmatch(core.rstrip(".")):
            tok = core = core.lstrip("±+-−")  # "±100 feet", "-40 degrees": a tolerance or a signed value
        if core.startswith("$") and re.fullmatch(r"\$\d[\d,]*(?:\.\d+)?", core.rstrip(".")):
            out.update(("money", "number"))
            continue
        if core in profile.number_words or re.fullmatch(r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?", core.rstrip(".")):
            before = tokens[i - 1].strip("(\"'").rstrip(".,") if i > 0 else ""
            if before in profile.reference_before or before.startswith("§") or tok.startswith("("):
                continue  # "§ 91.185", "part 61", "(2)": a reference or a list item
            after = tokens[i + 1].strip("(),;:").rstrip(".") if i + 1 < len(tokens) else ""
            if (after in profile.reference_after or before in profile.months or before in profile.reference_after
                    or re.fullmatch(r"(19|20)\d\d", after)):
                continue  # "14 CFR", "54 FR 41211", "Oct. 18, 1989": a citation or a date
            unit = _unit_after(tokens, i, profile)
            if unit is None and re.fullmatch(r"(19|20)\d\d|0\d+|\d{5,}", core.rstrip(".")):
                continue  # a year, or an identifier ("00725", "262047": prose writes 12,500 with a comma)
            if re.fullmatch(r"\d{1,2}\.", tok) and unit is None:
                continue  # "3. Considers ...": a list number
            if unit is None and (core in profile.number_words or "." in core.rstrip(".")):
                continue  # "one of the following", "91.185": not a stated quantity without a unit
            out.add("number")
            if unit is not None:
                out.add(unit)
        elif glued := _GLUED.fullmatch(core.rstrip(".")):  # "10ft", "121.5mhz", "300dpi", "8kb"
            classes = [cls for cls, words in profile.units.items() if glued.group(1) in words]
            if classes:
                out.update(("number", *classes))
    return out


_GLUED = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?([a-z°%/]+)")
_SIGNED = re.compile(r"[±+−-]\d[\d,]*(?:\.\d+)?")
_TOLERANCE = re.compile(r"([±+−-]\d[\d,.]*)/([±+−-]\d)")


def satisfies(expected: Expected | None, text: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    """Whether ``text`` states the kind of quantity ``expected`` asks for (always, when None)."""
    if expected is None:
        return True
    if expected.counted:
        return counts(text, expected.counted, profile)
    found = quantities(text, profile)
    if not expected.units:
        return "number" in found
    return bool(found & expected.units)


COUNT_WINDOW = 3  # "three takeoffs", "3 full-stop landings": the counted word follows within this many words


def counts(text: str, counted: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    """Whether ``text`` states a number of ``counted`` (a stemmed noun): "three takeoffs", "2 pilots"."""
    tokens = [t.strip("(),;:.\"'") for t in normalize(text).split()]
    for i, tok in enumerate(tokens):
        if tok in profile.number_words or re.fullmatch(r"\d{1,3}(?:,\d{3})*|\d+", tok):
            if any(stem(w).startswith(counted) or stem(w).endswith(counted)  # "70 distinct pointtypes"
                   for w in tokens[i + 1:i + 1 + COUNT_WINDOW]):
                return True
    return False


_TOKEN_RAW = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'-]|[.,](?=\d))*[A-Za-z0-9]|[A-Za-z0-9]")


def _sentence_start(question: str, tok: str) -> bool:
    return re.search(rf"[.?!:]\s+{re.escape(tok)}\b", question) is not None


_BARE_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def specific_terms(question: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The words that make a question specific: names (capitalised, not the first word, not "I") and
    designators with digits ("172S", "PA-28", "747-400"). In order, without repeats. A bare number ("29.50",
    "090") is not one: it is usually a value the asker supplies, which the text need not repeat."""
    raw = _TOKEN_RAW.findall(question.replace("\u2019", "'"))
    out: dict[str, None] = {}
    for i, tok in enumerate(raw):
        tok = tok.removesuffix("'s")
        if any(ch.isdigit() for ch in tok):
            if _BARE_NUMBER.fullmatch(tok):
                continue
        elif not (i > 0 and tok[0].isupper() and len(tok) > 1 and tok.lower() not in profile.stopwords
                  and not tok.startswith("I'") and not _sentence_start(question, tok)):
            continue
        out.setdefault(tok.lower())
    return list(out)

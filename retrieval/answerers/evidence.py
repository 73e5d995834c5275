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

from retrieval.answerers.lexical import STOPWORDS, stem
from retrieval.textnorm import normalize

# unit classes: the words (normalised, lower case) that state a measure of that kind after a number
UNITS: dict[str, tuple[str, ...]] = {
    "speed": ("knot", "knots", "kt", "kts", "kias", "ktas", "mph", "m.p.h", "miles per hour", "mach", "km/h",
              "kilometers per hour", "feet per minute", "fpm"),
    "length": ("foot", "feet", "ft", "mile", "miles", "nm", "nautical mile", "nautical miles", "statute mile",
               "statute miles", "meter", "meters", "metre", "metres", "m", "km", "kilometer", "kilometers",
               "inch", "inches", "yard", "yards", "sm"),
    "time": ("second", "seconds", "minute", "minutes", "min", "hour", "hours", "hr", "hrs", "day", "days",
             "week", "weeks", "month", "months", "year", "years", "calendar month", "calendar months",
             "calendar days", "calendar year", "calendar years"),
    "weight": ("pound", "pounds", "lb", "lbs", "kg", "kilogram", "kilograms", "ton", "tons", "ounce", "ounces"),
    "frequency": ("mhz", "khz", "hz", "ghz", "megahertz", "kilohertz", "hertz"),
    "temperature": ("°c", "°f", "° c", "° f", "degrees celsius", "degrees fahrenheit", "degree celsius",
                    "degree fahrenheit", "celsius", "fahrenheit", "degrees c", "degrees f"),
    "angle": ("°", "degree", "degrees"),
    "money": ("dollar", "dollars", "usd", "cents"),
    "percent": ("percent", "%", "per cent"),
}

# question words → the unit classes an answer may use (None: any stated quantity)
_HOW = {
    "fast": ("speed",), "slow": ("speed",), "quickly": ("time",), "soon": ("time",), "recently": ("time",),
    "long": ("time", "length"), "often": ("time",), "frequently": ("time",), "high": ("length",),
    "low": ("length",), "far": ("length",), "deep": ("length",), "wide": ("length",), "close": ("length",),
    "heavy": ("weight",), "old": ("time",), "hot": ("temperature",), "cold": ("temperature",),
    "warm": ("temperature",), "much": None, "many": None, "large": None, "big": None,
}
_MEASURE_NOUNS = {
    "speed": ("speed",), "speeds": ("speed",), "airspeed": ("speed",), "airspeeds": ("speed",),
    "velocity": ("speed",),
    "altitude": ("length",), "altitudes": ("length",), "height": ("length",), "heights": ("length",),
    "elevation": ("length",), "distance": ("length",), "distances": ("length",), "visibility": ("length",),
    "radius": ("length",), "range": ("length",), "length": ("length",), "ceiling": ("length",),
    "duration": ("time",), "age": ("time",), "period": ("time",),
    "weight": ("weight",), "weights": ("weight",), "mass": ("weight",),
    "frequency": ("frequency",), "frequencies": ("frequency",),
    "temperature": ("temperature",), "temperatures": ("temperature",),
    "fee": ("money",), "fees": ("money",), "cost": ("money",), "costs": ("money",), "price": ("money",),
    "charge": ("money",), "charges": ("money",),
    "percentage": ("percent",),
    "code": None, "codes": None, "number": None, "amount": None, "quantity": None, "limit": None,
    "limits": None, "rate": None,
}
_MONEY_VERBS = ("cost", "costs", "charge", "charges", "pay", "paid", "spend", "fee")

_Q_TOKEN = re.compile(r"[a-z0-9$%°][a-z0-9'-]*")
_WH = frozenset(("what", "which"))
_EXTREME = frozenset(("maximum", "minimum", "max", "min", "highest", "lowest", "greatest", "least", "best"))
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


def expected_answer(question: str) -> Expected | None:
    """The quantity a question asks for, or None when it does not ask for one."""
    words = _Q_TOKEN.findall(normalize(question))
    units: set[str] = set()
    cues: list[str] = []
    found = False
    counted = ""
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word == "how" and nxt in _HOW:
            found = True
            cues.append(f"how {nxt}")
            kinds = _HOW[nxt]
            if kinds:
                units.update(kinds)
            elif nxt == "much" and any(v in words for v in _MONEY_VERBS):
                units.add("money")
            elif nxt == "many":
                phrase = counted_phrase(words[i + 2:])
                unit = next((c for c, ws in UNITS.items() if phrase and phrase[0] in ws), None)
                if unit is not None:
                    units.add(unit)  # "how many days" is a time
                elif phrase:
                    counted = stem(phrase[-1])  # "how many backup fuses": fuses
        elif word in _WH or word in _EXTREME:
            for j in range(i + 1, min(i + 1 + NOUN_WINDOW, len(words))):
                if words[j] in _MEASURE_NOUNS:
                    found = True
                    cues.append(" ".join(words[i:j + 1]))
                    units.update(_MEASURE_NOUNS[words[j]] or ())
                    break
    if not found:
        return None
    return Expected(frozenset(units), "; ".join(cues), counted)


COUNTED_WORDS = 3  # "how many spare light bulbs": at most this many words name what is counted


def counted_phrase(words: list[str]) -> list[str]:
    """The words after "how many" that name what is counted, up to the first stopword."""
    out: list[str] = []
    for w in words[:COUNTED_WORDS]:
        if w in STOPWORDS:
            break
        out.append(w)
    return out


# A number as stated in prose: "250", "1,000", "121.5", "½"; with "$" in front for money.
_NUMBER = re.compile(r"(?<![\w.§-])(\$\s?)?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w-]|\.\d|\()")
_NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty "
                          "forty fifty sixty hundred thousand half twice once".split())
# words after which a number is a reference, not a quantity
_REFERENCE_AFTER = frozenset("cfr fr u.s.c usc edition amdt".split())  # "14 CFR", "54 FR 34294"
_MONTHS = frozenset("jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july "
                    "august september october november december".split())
_REFERENCE_BEFORE = frozenset("§ §§ part parts section sections subpart appendix table figure form ac order page "
                              "chapter paragraph item task tasks area areas no. no number far sfar amendment docket "
                              "chapters pages".split())


def _unit_after(tokens: list[str], i: int) -> str | None:
    """The unit class stated by the tokens right after position ``i`` (a number), if any."""
    for width in (3, 2, 1):  # longest first: "degrees celsius" before "degrees"
        phrase = " ".join(tokens[i + 1:i + 1 + width]).rstrip(".,;:)")
        for cls, words in UNITS.items():
            if phrase in words:
                return cls
    return None


def quantities(text: str) -> set[str]:
    """The kinds of quantity a text states: unit classes ("speed", "length", ...) with a number in
    front, plus "number" when it states any number that is not a reference (section, part, form)."""
    norm = normalize(text)
    out: set[str] = set()
    # glue "2 °C" / "2°C" / "$ 50" into separable tokens
    norm = re.sub(r"(\d)(°)", r"\1 \2", norm)
    norm = re.sub(r"(\d)(%)", r"\1 \2", norm)
    tokens = norm.split()
    for i, tok in enumerate(tokens):
        core = tok.strip("(),;:\"'")
        if core.startswith("$") and re.fullmatch(r"\$\d[\d,]*(?:\.\d+)?", core.rstrip(".")):
            out.update(("money", "number"))
            continue
        if core in _NUMBER_WORDS or re.fullmatch(r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?", core.rstrip(".")):
            before = tokens[i - 1].strip("(\"'").rstrip(".,") if i > 0 else ""
            if before in _REFERENCE_BEFORE or before.startswith("§") or tok.startswith("("):
                continue  # "§ 91.185", "part 61", "(2)": a reference or a list item
            after = tokens[i + 1].strip("(),;:").rstrip(".") if i + 1 < len(tokens) else ""
            if (after in _REFERENCE_AFTER or before in _MONTHS or before in _REFERENCE_AFTER
                    or re.fullmatch(r"(19|20)\d\d", after)):
                continue  # "14 CFR", "54 FR 41211", "Oct. 18, 1989": a citation or a date
            unit = _unit_after(tokens, i)
            if unit is None and re.fullmatch(r"(19|20)\d\d|0\d+|\d{5,}", core.rstrip(".")):
                continue  # a year, or an identifier ("00725", "262047": prose writes 12,500 with a comma)
            if re.fullmatch(r"\d{1,2}\.", tok) and unit is None:
                continue  # "3. Considers ...": a list number
            if unit is None and (core in _NUMBER_WORDS or "." in core.rstrip(".")):
                continue  # "one of the following", "91.185": not a stated quantity without a unit
            out.add("number")
            if unit is not None:
                out.add(unit)
        elif re.fullmatch(r"\d+(?:,\d{3})*(?:\.\d+)?(?:°[cf]?|%|mhz|khz|kts?|ft|lbs?|nm|sm)", core.rstrip(".")):
            suffix = re.sub(r"^[\d,.]+", "", core.rstrip("."))
            out.add("number")
            for cls, words in UNITS.items():
                if suffix in words:
                    out.add(cls)
    return out


def satisfies(expected: Expected | None, text: str) -> bool:
    """Whether ``text`` states the kind of quantity ``expected`` asks for (always, when None)."""
    if expected is None:
        return True
    if expected.counted:
        return counts(text, expected.counted)
    found = quantities(text)
    if not expected.units:
        return "number" in found
    return bool(found & expected.units)


COUNT_WINDOW = 3  # "three takeoffs", "3 full-stop landings": the counted word follows within this many words


def counts(text: str, counted: str) -> bool:
    """Whether ``text`` states a number of ``counted`` (a stemmed noun): "three takeoffs", "2 pilots"."""
    tokens = [t.strip("(),;:.\"'") for t in normalize(text).split()]
    for i, tok in enumerate(tokens):
        if tok in _NUMBER_WORDS or re.fullmatch(r"\d{1,3}(?:,\d{3})*|\d+", tok):
            if any(stem(w).startswith(counted) for w in tokens[i + 1:i + 1 + COUNT_WINDOW]):
                return True
    return False


_TOKEN_RAW = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'-]|[.,](?=\d))*[A-Za-z0-9]|[A-Za-z0-9]")


def _sentence_start(question: str, tok: str) -> bool:
    return re.search(rf"[.?!:]\s+{re.escape(tok)}\b", question) is not None


_BARE_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def specific_terms(question: str) -> list[str]:
    """The words that make a question specific: names (capitalised, not the first word, not "I") and
    designators with digits ("172S", "PA-28", "747-400"). In order, without repeats. A bare number ("29.50",
    "090") is not one: it is usually a value the asker supplies, which the text need not repeat."""
    raw = _TOKEN_RAW.findall(question.replace("\u2019", "'"))
    out: list[str] = []
    for i, tok in enumerate(raw):
        tok = tok.removesuffix("'s")
        if any(ch.isdigit() for ch in tok):
            if _BARE_NUMBER.fullmatch(tok):
                continue
            term = tok.lower()
        elif (i > 0 and tok[0].isupper() and len(tok) > 1 and tok.lower() not in STOPWORDS
              and not tok.startswith("I'") and not _sentence_start(question, tok)):
            term = tok.lower()
        else:
            continue
        if term not in out:
            out.append(term)
    return out

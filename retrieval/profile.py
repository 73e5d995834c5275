"""Language/domain profiles: every word list the answerers use, as data, per collection.

The extractive answerer reads questions and sentences with a few word lists: stopwords, the units
that state a quantity, the question words and measure nouns that ask for one, the words that make a
number a reference ("§ 91.185", "Table 3") rather than a quantity, how a follow-up leans on the
previous question ("and at night?"), and the fixed wording of its answer. None of these live in
code; they are a ``Profile``.

``DEFAULT_PROFILE`` is meant for English technical manuals in general — regulations and handbooks
(feet, knots, minutes) as well as software manuals (bytes, pixels, characters, lines, identifiers
such as ``x11()``, ``%in%``, ``set xrange``).

A collection can have its own profile: a JSON file ``<collection>.json`` in the directory named by
``CHAPTERVERSE_PROFILES_DIR`` (or one file for every collection, ``CHAPTERVERSE_PROFILE``). The
file holds only the fields it changes; the others keep their defaults. Example (a German-language
answer lead and two extra units)::

    {"answer_lead": "Die Handbücher sagen", "units": {"length": ["meter", "meters", "m", "km"]}}

A field given in the file replaces the default value of that field (lists are not merged).

A profile file may start from a named preset shipped in ``retrieval/presets/`` (``german``: German
stopwords, units, question words and wording, and Postgres' ``german`` text search), changing what
it lists over it::

    {"preset": "german", "answer_lead": "Laut Handbuch"}

``text_search`` names the Postgres text-search configuration: a document's chunks are indexed with
its collection's at ingest (``chunks.ts_config``, ``documents.text_search``), and a question is parsed
with every configuration its scope's documents were indexed with; a changed profile applies to a
document when it is ingested again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = _words("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has
have having he her here hers him his how i if in into is it its itself just me might more most must
my no nor not of off on once only or other our out over own same shall she should so some such than
that the their them then there these they this those through to too under until up upon very was we
were what when where which while who whom why will with would you your yours
get got give given make may much many need needs one ones per use used using whether within without
""")

_UNITS: dict[str, tuple[str, ...]] = {
    "speed": ("knot", "knots", "kt", "kts", "kias", "ktas", "mph", "m.p.h", "miles per hour", "mach", "km/h",
              "kilometers per hour", "feet per minute", "fpm"),
    "length": ("foot", "feet", "ft", "mile", "miles", "nm", "nautical mile", "nautical miles", "statute mile",
               "statute miles", "meter", "meters", "metre", "metres", "m", "km", "kilometer", "kilometers",
               "inch", "inches", "yard", "yards", "sm", "cm", "mm", "centimeters", "millimeters"),
    "time": ("second", "seconds", "sec", "secs", "ms", "millisecond", "milliseconds", "microseconds",
             "minute", "minutes", "min", "hour", "hours", "hr", "hrs", "day", "days",
             "week", "weeks", "month", "months", "year", "years", "calendar month", "calendar months",
             "calendar days", "calendar year", "calendar years"),
    "weight": ("pound", "pounds", "lb", "lbs", "kg", "kilogram", "kilograms", "ton", "tons", "ounce", "ounces"),
    "frequency": ("mhz", "khz", "hz", "ghz", "megahertz", "kilohertz", "hertz"),
    "temperature": ("°c", "°f", "° c", "° f", "degrees celsius", "degrees fahrenheit", "degree celsius",
                    "degree fahrenheit", "celsius", "fahrenheit", "degrees c", "degrees f"),
    "angle": ("°", "degree", "degrees", "radian", "radians"),
    "money": ("dollar", "dollars", "usd", "cents"),
    "percent": ("percent", "%", "per cent"),
    "data": ("bit", "bits", "byte", "bytes", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "kilobyte",
             "kilobytes", "megabyte", "megabytes", "gigabyte", "gigabytes"),
    "text": ("character", "characters", "char", "chars", "line", "lines", "column", "columns", "digit",
             "digits", "significant digits", "decimal places", "row", "rows"),
    "display": ("pixel", "pixels", "px", "point", "points", "pt", "dpi", "em"),
}

_HOW: dict[str, tuple[str, ...] | None] = {
    "fast": ("speed",), "slow": ("speed",), "quickly": ("time",), "soon": ("time",), "recently": ("time",),
    "long": ("time", "length", "text", "data"), "often": ("time",), "frequently": ("time",),
    "high": ("length", "display"), "low": ("length",), "far": ("length",), "deep": ("length",),
    "wide": ("length", "text", "display"), "close": ("length",), "heavy": ("weight",), "old": ("time",),
    "hot": ("temperature",), "cold": ("temperature",), "warm": ("temperature",),
    "much": None, "many": None, "large": None, "big": None,
}

_MEASURE_NOUNS: dict[str, tuple[str, ...] | None] = {
    "speed": ("speed",), "speeds": ("speed",), "airspeed": ("speed",), "airspeeds": ("speed",),
    "velocity": ("speed",),
    "altitude": ("length",), "altitudes": ("length",), "height": ("length", "display", "text"),
    "heights": ("length", "display", "text"), "elevation": ("length",), "distance": ("length",),
    "distances": ("length",), "visibility": ("length",), "radius": ("length",), "range": ("length",),
    "length": ("length", "text", "data"), "ceiling": ("length",), "width": ("length", "display", "text"),
    "duration": ("time",), "age": ("time",), "period": ("time",), "timeout": ("time",), "delay": ("time",),
    "interval": ("time",),
    "weight": ("weight",), "weights": ("weight",), "mass": ("weight",),
    "frequency": ("frequency",), "frequencies": ("frequency",),
    "temperature": ("temperature",), "temperatures": ("temperature",),
    "fee": ("money",), "fees": ("money",), "cost": ("money",), "costs": ("money",), "price": ("money",),
    "charge": ("money",), "charges": ("money",),
    "percentage": ("percent",),
    "resolution": ("display",), "size": None, "precision": None,
    "code": None, "codes": None, "number": None, "amount": None, "quantity": None, "limit": None,
    "limits": None, "rate": None,
}


class Profile(BaseModel):
    """The word lists and wording of one language/domain (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    name: str = "english-technical"
    stopwords: frozenset[str] = Field(default=_STOPWORDS, description="words that carry no content")
    units: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: dict(_UNITS),
        description="unit class → the words (lower case) that state a measure of that kind after a number")
    how_words: dict[str, tuple[str, ...] | None] = Field(
        default_factory=lambda: dict(_HOW),
        description='"how X" → the unit classes an answer may use (null: any stated number)')
    measure_nouns: dict[str, tuple[str, ...] | None] = Field(
        default_factory=lambda: dict(_MEASURE_NOUNS),
        description='a noun after "what/which/maximum…" that asks for a quantity → its unit classes')
    how_openers: frozenset[str] = Field(default=_words("how"), description='"how" before a how-word ("how long")')
    amount_words: frozenset[str] = Field(default=_words("much"), description='"how much": with a money verb, asks for money')
    count_words: frozenset[str] = Field(default=_words("many"), description='"how many": the words after it name what is counted')
    money_verbs: frozenset[str] = _words("cost costs charge charges pay paid spend fee")
    wh_words: frozenset[str] = _words("what which")
    extreme_words: frozenset[str] = _words("maximum minimum max min highest lowest greatest least best "
                                           "largest smallest default")
    number_words: frozenset[str] = _words("one two three four five six seven eight nine ten eleven twelve "
                                          "fifteen twenty thirty forty fifty sixty hundred thousand half "
                                          "twice once")
    reference_after: frozenset[str] = Field(default=_words("cfr fr u.s.c usc edition amdt"),
                                            description='"14 CFR": a number before these is a citation')
    reference_before: frozenset[str] = Field(
        default=_words("§ §§ part parts section sections subpart appendix table figure form ac order page "
                       "chapter paragraph item task tasks area areas no. no number far sfar amendment docket "
                       "chapters pages version release example equation eq. fig. line"),
        description='"part 61", "Table 3": a number after these is a reference, not a quantity')
    document_words: frozenset[str] = Field(
        default=_words("manual manuals documentation guide handbook introduction intro reference standards "
                       "standard edition version revised chapter part section user users"),
        description="title words that say what kind of document it is rather than which one (never name it)")
    months: frozenset[str] = _words("jan feb mar apr may jun jul aug sep sept oct nov dec january february "
                                    "march april june july august september october november december")
    followup_openers: tuple[str, ...] = Field(
        default=("and", "or", "but", "also", "what about", "how about", "and what about", "same for", "what if",
                 "then", "so", "in that case", "does that", "is that", "is it", "does it", "why"),
        description="a follow-up that opens with one of these continues the previous question")
    pronouns: frozenset[str] = _words("it its that this they them those these there he she")
    negations: frozenset[str] = Field(default=_words("not no never none nor cannot can't don't doesn't "
                                                     "isn't aren't won't mustn't shouldn't without"),
                                      description="words that turn a statement round (checked in model answers)")
    lowercase_sentence_starts: bool = Field(
        default=True, description='a sentence may open in lower case after ". ", "? " or "! " ("refresh '
                                  'redraws the plot.", "x11() opens a window."), except after an abbreviation')
    abbreviations: frozenset[str] = Field(
        default=_words("e.g. i.e. etc. cf. vs. viz. approx. fig. figs. no. nos. sec. secs. p. pp. ch. vol. "
                       "ed. eds. al. resp. min. max. incl. esp. ca."),
        description='words ending in "." that do not end a sentence before a lower-case word')
    text_search: str = Field(
        default="english", pattern=r"^[a-z_]+$",
        description="the Postgres text-search configuration of the collection's chunks and of questions "
                    "asked of it ('english', 'german', 'french', … as Postgres ships them)")
    answer_lead: str = Field(default="The handbooks say", description="opens the extractive answer")
    more_quoted: str = Field(default="({n} more supporting passage{s} quoted below.)",
                             description="after the answer when further quotes follow")


DEFAULT_PROFILE = Profile()


class ProfileSettings(BaseSettings):
    """Where profiles come from (environment, prefix ``CHAPTERVERSE_``)."""

    model_config = SettingsConfigDict(env_prefix="CHAPTERVERSE_", extra="ignore")

    profiles_dir: Path | None = None  # <collection>.json files
    profile: Path | None = None  # one profile file for every collection without its own


class ProfileError(ValueError):
    """A profile file that cannot be read or does not match ``Profile``: one clear line."""


PRESETS = Path(__file__).resolve().parent / "presets"


def presets() -> list[str]:
    """The named presets shipped in ``retrieval/presets/`` (a profile file may start from one)."""
    return sorted(p.stem for p in PRESETS.glob("*.json"))


@lru_cache(maxsize=64)
def _load(path: Path, mtime: float) -> Profile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("a profile is a JSON object")
        base = DEFAULT_PROFILE.model_dump()
        name = data.pop("preset", None)
        if name is not None:
            if name not in presets():
                raise ValueError(f"no preset {name!r}; presets: {', '.join(presets())}")
            base = {**base, **json.loads((PRESETS / f"{name}.json").read_text(encoding="utf-8"))}
        return Profile.model_validate({**base, **data})
    except (OSError, ValueError) as exc:
        raise ProfileError(f"profile {path}: {str(exc).splitlines()[0]}") from None


def load_profile(path: Path) -> Profile:
    """A profile file: the fields it gives over the defaults."""
    try:
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise ProfileError(f"profile {path}: {exc.strerror}") from None
    return _load(path, mtime)


def profile_for(collections: Sequence[str] | None, settings: ProfileSettings | None = None) -> Profile:
    """The profile of the searched collections: the first of them with a file in ``profiles_dir``,
    else the ``profile`` file, else ``DEFAULT_PROFILE``."""
    settings = settings or ProfileSettings()
    if settings.profiles_dir is not None:
        for name in collections or ():
            path = settings.profiles_dir / f"{name}.json"
            if path.is_file():
                return load_profile(path)
    if settings.profile is not None:
        return load_profile(settings.profile)
    return DEFAULT_PROFILE


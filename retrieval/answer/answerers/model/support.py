"""Whether a model's free answer text says only what its verified quotes say (pure functions).

Quotes are checked word for word (``retrieval.answer.verify``); a model's own sentence cannot be, so it is
held to its quotes on what most often turns a right-looking answer wrong:

- **numbers**: every number in the text ("1,000", "3.5", "10-12") occurs, as a whole, in a quote;
- **units**: every unit the text puts after a number ("45 minutes", "3 statute miles", "8 bytes",
  unit words from the collection's ``Profile``) occurs in a quote;
- **negations**: a text that negates ("not", "never", "no", "cannot", ...; the profile's list) is
  backed by a quote that negates too, so "is not required" cannot stand on "is required";
- **names**: every name or designator the text uses (capitalised words other than a sentence's
  first, words with digits such as "172S"; ``evidence.specific_terms``) occurs in a quote.

Anything missing is reported; ``retrieval.answer.ask`` then shows the verified quotes alone.

The same statement in other spacing or spelling is not a false alarm (measured on a stand-in model's
recorded replies, ``results/model_path/``): "27 °C" / "27°C", an abbreviation a quote spells out or
the reverse, the "No" opening the answer to a yes/no question, and negations restating a question
about what is prohibited (each where ``unsupported`` checks it). Nor, since issue 38, are these:

- the numbers that count the text's own list ("1) … 2) …", "(1) … (2) …", "1. … 2. …" at line or
  sentence starts; only a run 1, 2, 3, … of at least two): they number items, they state nothing;
- a name a quote writes with the same letters in other case, split or joined ("RelTol", "reltol",
  "rel_tol", "Rel Tol"), in the singular or plural ("Tasks" / "Task"), or whose CamelCase or
  snake_case parts begin a quote's consecutive words ("RelTol" / "relative tolerance", either way);
- a negation a quote states without "not": "unless", "except", "nothing", ..., or another form of a
  long negation word ("prohibit" / "prohibited"); and "not only", "whether or not", "No. 5" are no
  negations. "only" backs no "not" ("required only at night" / "not required at night").
- since the third round of issue 38: a question asks for a yes or a no when a sentence opens with a verb
  that asks one, or a clause does with no "what", "how", … before it ("After upgrading, can I …?", "I use
  X. Will it …?"), so the "No" opening its answer is no claim either; "impossible", "unable",
  "unsupported", … back a "cannot"; and a bound said with "no" ("no more than one frame per minute") is
  backed by a quote stating a bound ("at most one").

- since the sixth round: digits glued to a name's letters ("why3", "algorithm2e") are that name, not a
  number; a name the quoted document is named after ("SBCL" / sbcl.pdf, "AMC" / auto-multiple-choice.pdf:
  ``names_document``); a negation a quote makes with "rather than" or "instead of"; a negation restating
  one the question states as a fact ("There is no X server here. Can I …?" / "No X server is needed":
  ``restates_premise``); a control key in caret notation ("^U" / "Ctrl-U"). ``checks.settled`` holds
  the text to its quotes as shown, adjacent ones joined with the page text between them.

- a name the question itself states that the page of a verified quote states too ("VFR", "Class E",
  "Fundamentals of Instructing" in a section heading the quote starts below): the answer repeats what was
  asked about, and the page shows it is that page's subject. A name only the question states (a false
  premise: "the Cessna 172's VNE" over a POH of another airplane) stays an alarm.

- since the seventh round: a name a quote writes inside a hyphenated word ("LMDB" / "LMDB-specific",
  "BLASTX-style" / "BLASTX"; ``mentions``, which ``normalize``'s joining of such words hid), in the name check
  and in the bare-"No" rule, which also takes a name the quoted document is named after as mentioned.

- since the ninth round: a list item's first word ("2) Run bos adduser …": the marker is a sentence break, so
  the word starts a sentence, not a name), and a unit a quote states in its other number ("1 bit" / "the number
  of bits"; units of three letters or more).

What stays an alarm: a number or unit no quote states, a name whose letters no quote has (unless
the question and a quoted page both state it), a "not" in a text whose quotes neither negate nor
exclude anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

from retrieval.answer.answerers.extractive.evidence import specific_terms
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize

# a number as written: "250", "1,000", "3.5", "10-12" (the dash family is "-" after normalize); digits glued
# to the letters before them are part of a name ("why3", "algorithm2e", "x11", "s01"), checked as a name: no
# number starts after a letter or inside such a run of digits (the "1" of "s01")
_NUMBER = re.compile(r"(?<![^\W_])\d+(?:[.,-]\d+)*")
_WORD = re.compile(r"[a-z0-9'’]+")
# the space between a number and what it measures ("4 gb", "27 °c") is spelling, not content
_NUMBER_SPACE = re.compile(r"(?<=\d)[ \t]+(?=[^\W\d_]|[°%])")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]*[A-Z]s?\b")  # VFR, ATC, PDFs
_CAPITALISED_RUN = re.compile(r"\b(?:[A-Z][a-z]+(?:\s+(?:of|and|for|the|to|in|on)\s+|\s+)){1,7}[A-Z][a-z]+\b")
_LINKING = frozenset({"of", "and", "for", "the", "to", "in", "on", "a"})
_YES_NO_OPENERS = frozenset({"is", "are", "was", "were", "do", "does", "did", "can", "could", "may", "might",
                             "must", "should", "will", "would", "has", "have", "had", "shall",
                             "isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "can't",
                             "couldn't", "mustn't", "shouldn't", "won't", "wouldn't", "hasn't", "haven't"})
# a question's sentences, and where a clause starts inside one: after a comma, semicolon or colon
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_CLAUSE = re.compile(r"[,;:]\s+([a-z']+)")
_WH = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how"})


def _has_number(number: str, quotes: str) -> bool:
    return re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(number)}(?!\d)(?![.,]\d)", quotes) is not None


# the rest of a name whose digits are glued to its letters and go on after a dot, comma or dash ("g18.10",
# "python3.11"): the number after the dot is part of that name, checked with it as one token
_GLUED_TAIL = re.compile(r"[^\W_]*\d[.,-]\Z")


def _glued_token(norm: str, start: int, end: int) -> str | None:
    """The whole name token when the number at ``norm[start:end]`` goes on a name's glued digits
    ("10" of "g18.10"), else None."""
    head = re.search(r"[^\W_]+(?:[.,-]\d+)*[.,-]\Z", norm[:start])
    if not head or not _GLUED_TAIL.search(norm[:start]) or not re.search(r"[^\W\d_]", head[0]):
        return None
    tail = re.match(r"\d*(?:[.,-]\d+)*", norm[end:])
    return head[0] + norm[start:end] + (tail[0] if tail else "")


def unquoted_numbers(text: str, quotes: Sequence[str]) -> list[str]:
    """The numbers in ``text`` that occur in none of the quotes, compared after normalisation. A
    number occurs only as a whole: "250" is not in "2,500", "3" not in "3.5"; "10" is in "10-12". A
    number that goes on a name's glued digits ("10" of "G18.10") is compared as that whole name."""
    joined = "\n".join(normalize(q) for q in quotes)
    norm = normalize(text)
    out: list[str] = []
    for m in _NUMBER.finditer(norm):
        token = _glued_token(norm, m.start(), m.end())
        if token is None:
            missing = not _has_number(m[0], joined)
        else:
            missing = re.search(rf"(?<![^\W_]){re.escape(token)}(?![^\W_])(?![.,-]\d)", joined) is None
        if missing:
            out.append(token or m[0])
    return list(dict.fromkeys(out))


def compact(text: str) -> str:
    """Normalised text without the space between a number and its unit ("4 gb" → "4gb")."""
    return _NUMBER_SPACE.sub("", normalize(text))


def _whole(phrase: str, text: str, *, unit_glue: bool) -> bool:
    if not phrase:
        return False
    before = r"(?<![a-z])" if unit_glue and not phrase[0].isdigit() else r"(?<![a-z0-9])"
    after = r"(?![a-z0-9])" if phrase[-1].isalnum() else ""
    return re.search(rf"{before}{re.escape(phrase)}{after}", text) is not None


def _has_words(phrase: str, quotes: str) -> bool:
    """``phrase`` occurs in ``quotes`` as whole words, as written or with a number and its unit
    written together ("4 GB" in "4GB", "GB" after "4")."""
    norm = normalize(phrase)
    return _whole(norm, normalize(quotes), unit_glue=False) or _whole(compact(norm), compact(quotes), unit_glue=True)


def _initials(words: Sequence[str]) -> tuple[str, str]:
    """The initials of ``words``, with and without the linking words ("flight of rules" → "for", "fr")."""
    return "".join(w[0] for w in words), "".join(w[0] for w in words if w not in _LINKING)


def spells_out(acronym: str, quotes: str) -> bool:
    """Some run of consecutive words of ``quotes`` has ``acronym``'s letters as initials ("VFR" and
    "visual flight rules"), with or without the linking words ("of", "and", ...) among them."""
    letters = acronym.lower().removesuffix("s") if len(acronym) > 2 else acronym.lower()
    words = re.findall(r"[a-z]+", normalize(quotes))
    n = len(letters)
    return any(letters in _initials(words[i:j]) and words[i][0] == letters[0] and words[j - 1][0] == letters[-1]
               for i in range(len(words)) for j in range(i + n, min(len(words), i + 2 * n) + 1))


def _abbreviated(text: str, quotes: str) -> set[str]:
    """Names in ``text`` that a quote states in other form: an acronym it spells out, or capitalised
    words it abbreviates ("Air Traffic Control" when a quote says "ATC"); lower-cased, as
    ``specific_terms`` gives them."""
    out = {a.lower() for a in _ACRONYM.findall(text) if spells_out(a, quotes)}
    for m in _CAPITALISED_RUN.finditer(text):
        run = m.group(0).lower().split()
        for i in range(len(run)):
            for j in range(i + 2, len(run) + 1):
                words = run[i:j]
                if words[0] in _LINKING or words[-1] in _LINKING:
                    continue
                if any(_has_words(form, quotes) for form in _initials(words) if len(form) >= 2):
                    out.update(words)
    return out


# an item's number in a list the text makes: "(1)" or "1)" after a space or at the start, "1." at the
# start of the text, of a line or of a sentence
_MARKER = re.compile(r"(?<![\w.,])\((\d{1,2})\)|(?<![\w.,()])(\d{1,2})\)(?=\s|$)"
                     r"|(?:\A|(?<=\n)|(?<=[:;.!?] ))[ \t]*(\d{1,2})\.(?=\s)")


def list_markers(text: str) -> list[tuple[int, int]]:
    """The spans of the numbers that count the items of a list in ``text``: markers (``_MARKER``)
    that run 1, 2, 3, … in the text's order, at least two in a run ("1) a, 2) b" but not a lone
    "(3)"; "(at most 3)" is a number unless it continues a run of 1 and 2). A new run may start at 1."""
    runs: list[list[tuple[int, int]]] = [[]]
    for m in _MARKER.finditer(text):
        group = next(g for g in (1, 2, 3) if m.group(g) is not None)
        value = int(m.group(group))
        if value == len(runs[-1]) + 1:
            runs[-1].append(m.span(group))
        elif value == 1:
            runs.append([m.span(group)])
    return [span for run in runs if len(run) >= 2 for span in run]


def without_list_markers(text: str) -> str:
    """``text`` with each item marker of its list (``list_markers``: the number with its brackets or dot)
    turned into a sentence break of the same length: "… command. 2) Run bos …" reads "… command. :  Run
    bos …", so an item's first word starts a sentence and is not read as a name."""
    out = text
    for start, end in reversed(list_markers(text)):
        start -= start > 0 and out[start - 1] == "("
        end += end < len(out) and out[end] in ")."
        out = out[:start] + ":".ljust(end - start) + out[end:]
    return out


_ALNUM = re.compile(r"[^\W_]+")
MAX_RUN = 4  # words of a name written apart ("rel tol") that may make one written together ("reltol")
MIN_JOINED = 4  # letters a name written together must have to be matched across a split


def _runs(norm: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each word of normalised ``norm`` alone, and each run of up to ``MAX_RUN`` consecutive words
    written together, with the words it joins: "rel tol" → "reltol", "rel_tol" → "reltol". Words join
    where letters meet letters across a space, or across one "-", "_", "." or "/"; a run that joins
    is at least ``MIN_JOINED`` characters long, so two stray letters do not make a name."""
    words = list(_ALNUM.finditer(norm))
    out: list[tuple[str, tuple[str, ...]]] = []
    for i, first in enumerate(words):
        joined, parts = first.group(0), [first.group(0)]
        out.append((joined, tuple(parts)))
        for j in range(i + 1, min(len(words), i + MAX_RUN)):
            left, right = words[j - 1].group(0), words[j].group(0)
            gap = norm[words[j - 1].end():words[j].start()]
            if not (gap in ("-", "_", ".", "/") or (gap.isspace() and left[-1].isalpha() and right[0].isalpha())):
                break
            joined += right
            parts.append(right)
            if len(joined) >= MIN_JOINED:
                out.append((joined, tuple(parts)))
    return out


def _forms(word: str) -> set[str]:
    """``word`` and, for a word of letters, its plural or singular by a final "s"/"es" ("tasks" → "task")."""
    if not word.isalpha() or len(word) < MIN_JOINED:
        return {word}
    forms = {word, word + "s"}
    if word.endswith("s"):
        forms.add(word[:-1])
    if word.endswith("es"):
        forms.add(word[:-2])
    return forms


MIN_UNIT_FORMS = 3  # letters a unit needs to be matched in its other number ("m" is no singular of "ms")


def _unit_forms(unit: str) -> set[str]:
    """``unit`` and its singular or plural by a final "s"/"es" ("1 bit" is stated by "the number of bits"),
    for a unit of at least ``MIN_UNIT_FORMS`` letters; the number beside it is checked on its own."""
    if sum(ch.isalpha() for ch in unit) < MIN_UNIT_FORMS or not unit.replace(" ", "").isalpha():
        return {unit}
    forms = {unit, unit + "s", unit + "es"}
    if unit.endswith("s"):
        forms.add(unit[:-1])
    if unit.endswith("es"):
        forms.add(unit[:-2])
    return forms


def _same_letters(text: str, quotes: str) -> set[str]:
    """The words of ``text`` that a quote writes with the same letters, whatever the case, the
    splitting or the joining ("Rel Tol" / "reltol", "RelTol" / "rel_tol", "Tasks" / "Task")."""
    quoted = {joined for joined, _ in _runs(normalize(quotes))}
    return {w for joined, words in _runs(normalize(text)) if _forms(joined) & quoted for w in words}


# the parts of a name: "RelTol" → Rel, Tol; "XMLHttp" → XML, Http; "rel_tol" → rel, tol
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_IDENT = re.compile(r"[A-Za-z0-9]+(?:[_.\-][A-Za-z0-9]+)*")
MIN_PART = 2  # letters each part of a name must have to be read as the start of a word


_CAMEL_OR_SNAKE = re.compile(r"[a-z][A-Z]|[A-Za-z0-9]_[A-Za-z]")  # "RelTol", "rel_tol"; not "single-engine"


def _parts(ident: str) -> list[str]:
    """The parts of a CamelCase or snake_case ``ident``, lower-cased, when it has two or more, each of
    letters only and at least ``MIN_PART`` long; else none (a hyphenated word is no such name)."""
    parts = [p.lower() for p in _PART.findall(ident)]
    if (len(parts) < 2 or not _CAMEL_OR_SNAKE.search(ident)
            or any(not p.isalpha() or len(p) < MIN_PART for p in parts)):
        return []
    return parts


def _begins(parts: Sequence[str], words: Sequence[str]) -> list[str]:
    """The first run of consecutive ``words`` that ``parts`` begin in order, one part a word; empty if none."""
    n = len(parts)
    for i in range(len(words) - n + 1):
        if all(w.startswith(p) for p, w in zip(parts, words[i:i + n])):
            return list(words[i:i + n])
    return []


def _part_spelled(text: str, quotes: str) -> set[str]:
    """Names the text and a quote write one as a CamelCase or snake_case name, the other as the words
    its parts begin ("RelTol" or "rel_tol" / "relative tolerance", in either direction); the text's
    side of each, lower-cased, as ``specific_terms`` gives it."""
    out: set[str] = set()
    quote_words = _ALNUM.findall(normalize(quotes))
    for ident in _IDENT.findall(text):
        if (parts := _parts(ident)) and _begins(parts, quote_words):
            out.add(ident.lower())
            out.update(re.split(r"[_.]", ident.lower()))
    text_words = _ALNUM.findall(normalize(text))
    for ident in _IDENT.findall(quotes):
        if parts := _parts(ident):
            out.update(_begins(parts, text_words))
    return out


def yes_no(question: str) -> bool:
    """The question asks for a yes or a no: one of its sentences opens with a verb that asks one ("Is a
    transponder required …?", "I use X. Will it …?", "How do I detect a failure? Do functions return -1
    …?"), or one of its clauses does with no "what", "how", … before it in its sentence ("After upgrading,
    can I keep …?"; not "Over what places, and below what height, is aerobatic flight prohibited?")."""
    for sentence in _SENTENCE_END.split(normalize(question).replace("’", "'").lower()):
        words = _WORD.findall(sentence)
        if words and words[0] in _YES_NO_OPENERS:
            return True
        for m in _CLAUSE.finditer(sentence):
            if m.group(1) in _YES_NO_OPENERS and not _WH & set(_WORD.findall(sentence[:m.start()])):
                return True
    return False


_OPENING_NO = re.compile(r"\s*no\b", re.IGNORECASE)


def _without_yes_no(text: str) -> str:
    """``text`` without the "Yes"/"No" that opens the answer to a yes/no question."""
    return re.sub(r"\A\s*(?:yes|no)\b[\s,.;:—-]*", "", text, flags=re.IGNORECASE)


def stated_units(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The unit words the text puts right after a number ("45 minutes" → "minutes"), longest first."""
    norm = normalize(text)
    out: dict[str, None] = {}
    for m in _NUMBER.finditer(norm):
        rest = norm[m.end():].lstrip()
        stated = [u for words in profile.units.values() for u in words if re.match(rf"{re.escape(u)}(?![a-z0-9])", rest)]
        if stated:
            out.setdefault(max(stated, key=len))
    return list(out)


# what reads as a negation and is none: "not only … but", "whether or not", "no matter", "No. 5"
_NO_NEGATION = re.compile(r"\bnot only\b|\bwhether or not\b|\bor not(?=\s*(?:[.,;:?!)]|$))|\bno matter\b"
                          r"|\bno\.\s*(?=\d)")
# words that negate without a negation word: "unless" (if not), "except" (but not), "nothing" (not
# anything), ...; a quote holding one states what a text may say with "not". "only" is not among them:
# "required only at night" must not back "not required at night".
EXCLUDING = frozenset({"unless", "except", "excepting", "excluding", "neither", "nothing", "nobody", "nowhere",
                       "impossible", "unable", "unavailable", "unsupported", "disallowed", "illegal"})
# phrases that state what is not done: "a code comparison rather than locale-sensitive ordering"
_EXCLUDING_PHRASE = re.compile(r"\brather than\b|\binstead of\b")
# a bound said with "no": "no more than one frame per minute" is "at most one"; it is no negation when a
# quote states a bound too ("at most", "up to", "maximum", "exceed", …), and stays one otherwise, so "no
# more than 3" cannot stand on "more than 3 are required"
_NO_BOUND = re.compile(r"\bno\s+(?:more|less|fewer|later|earlier|greater|longer|larger|sooner|higher|lower|smaller"
                       r"|shorter|further|farther)(?:\s+[a-z-]+){0,3}?\s+than\b")  # "no more frames than"
_BOUND = re.compile(r"\bat (?:most|least|the (?:most|latest|earliest))\b|\bup to\b|\bmaxim|\bminim|\bexceed"
                    r"|\bor (?:less|fewer|more|earlier|later|greater)\b|\bno (?:more|less|fewer|later|earlier) than\b"
                    r"|\blimit")
STEM = 7  # letters a word must share with a long negation to be one of its forms ("prohibition", "prohibit")


def _is_negation(word: str, profile: Profile) -> bool:
    """``word`` (a normalised word) is "not" in one of its forms: the profile's negations, any "n't"."""
    return word in profile.negations or word.endswith("n't")


def negates(text: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    """``text`` says "not" in one of its forms (``_is_negation``), idioms aside."""
    words = _WORD.findall(_NO_NEGATION.sub(" ", normalize(text).replace("’", "'")))
    return any(_is_negation(w, profile) for w in words)


def _negation_form(word: str, profile: Profile) -> bool:
    return any(len(n) >= STEM and word[:max(STEM, len(n) - 3)] == n[:max(STEM, len(n) - 3)]
               for n in profile.negations)


def negates_or_excludes(quote: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    """``quote`` negates (``negates``), excludes (``EXCLUDING``: "unless", "except", "nothing", ...) or
    uses another form of a long negation ("prohibit", "prohibition" beside "prohibited"): it may back
    a text that negates."""
    if negates(quote, profile) or _EXCLUDING_PHRASE.search(normalize(quote)):
        return True
    return any(w in EXCLUDING or _negation_form(w, profile) for w in _WORD.findall(normalize(quote)))


MIN_NAME_PART = 4  # letters a name must have to be backed as a part of a document name's word


def names_document(term: str, documents: Sequence[str]) -> bool:
    """``term`` (a name from ``specific_terms``) is what one of ``documents`` is named after: a word or
    words of its file name ("sbcl" / "sbcl.pdf", "mrbayes" / "Manual_MrBayes_v3.2.pdf"), a part of one
    when it has at least ``MIN_NAME_PART`` letters ("circuitikz" and "tikz" / "circuitikzmanual.pdf"),
    or an acronym its words spell out ("amc" / "auto-multiple-choice.en.pdf"). A document's own subject
    is no claim the answer adds. The file name is cut into words at its punctuation before it is
    normalised, since ``normalize`` would join "gap-tutorial" into one word and lose "gap"."""
    key = "".join(_ALNUM.findall(normalize(term)))
    if not key:
        return False
    for document in documents:
        stem = PurePath(document).stem.lower()
        joined = {j for j, _ in _runs(normalize(" ".join(re.split(r"[\W_]+", stem))))}
        if key in joined or (len(key) >= MIN_NAME_PART and any(key in j for j in joined)):
            return True
        if len(key) >= 3 and key.isalpha() and spells_out(key, " ".join(_ALNUM.findall(stem))):
            return True
    return False


# a hyphen inside a word ("BLASTX-style", "LMDB-specific"), which ``normalize`` joins away ("blastxstyle"); not
# one at a line's end or before a space ("air- craft"), which joins the halves of one broken word
_WORD_HYPHEN = re.compile(r"(?<=[^\W_])[-\u2010\u2011](?=[^\W_])")


def _hyphens_apart(text: str) -> str:
    """``text`` normalised with each hyphen inside a word read as a space: "LMDB-specific" → "lmdb specific"."""
    return normalize(_WORD_HYPHEN.sub(" ", text))


def _is_name_part(part: str) -> bool:
    return any(ch.isupper() or ch.isdigit() for ch in part)


def mentions(term: str, source: str, quotes: str) -> bool:
    """The name ``term`` (lower-cased, from ``specific_terms(source)``) occurs in ``quotes`` as whole words:
    as written, or with the hyphens inside words read as spaces on both sides, where a hyphenated name
    is mentioned by its parts that are names on their own, as ``source`` writes them (capitalised or with
    digits), each run of them as consecutive words: "LMDB" by "LMDB-specific", "BLASTX-style" by
    "BLASTX", "PA-28" by "PA-28" or "PA 28" and not by "PA-32 … 28". ``normalize`` alone joins the hyphen
    and finds neither ("lmdbspecific", "blastxstyle")."""
    if _has_words(normalize(term), quotes):
        return True
    written = re.search(re.escape(term).replace("'", "['’]"), source, re.IGNORECASE)
    parts = _WORD_HYPHEN.sub(" ", written.group(0) if written else term).split()
    runs: list[list[str]] = [[]]
    for part in parts:
        if _is_name_part(part) or not written:
            runs[-1].append(part)
        elif runs[-1]:
            runs.append([])
    apart = _hyphens_apart(quotes)
    named = [run for run in runs if run]
    return bool(named) and all(_whole(normalize(" ".join(run)), apart, unit_glue=False) for run in named)


def _negated_windows(sentence: str, profile: Profile, width: int) -> list[list[str]]:
    """The ``width`` words after each negation in ``sentence`` (normalised words)."""
    words = _WORD.findall(_NO_NEGATION.sub(" ", sentence))
    return [words[i + 1:i + 1 + width] for i, w in enumerate(words) if _is_negation(w, profile)]


PREMISE_WORDS = 2  # words after a negation that must follow a negation of the question's own statement
PREMISE_WINDOW = 4  # words after a negation in the question's statement they may be among


def restates_premise(text: str, question: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    """Every negation in ``text`` restates one the question states as a fact, not asks about ("There is no
    X server on my machine. Can I still use the IDE?" / "No X server is needed."): the ``PREMISE_WORDS``
    words after it are among the ``PREMISE_WINDOW`` after a negation in a sentence of the question that
    does not end with "?"."""
    statements = [s for s in _SENTENCE_END.split(normalize(question).replace("’", "'")) if not s.rstrip().endswith("?")]
    windows = [set(w) for s in statements for w in _negated_windows(s, profile, PREMISE_WINDOW)]
    said = _negated_windows(normalize(text).replace("’", "'"), profile, PREMISE_WORDS)
    return bool(said) and all(after and any(set(after) <= w for w in windows) for after in said)


# a control key in caret notation ("^U") is the same key as "Ctrl-U"
_CARET_KEY = re.compile(r"(?<![\w^])\^([a-z])(?![a-z0-9])", re.IGNORECASE)


def unsupported(text: str, quotes: Sequence[str], profile: Profile = DEFAULT_PROFILE, *,
                question: str = "", pages: Sequence[str] = (), documents: Sequence[str] = ()) -> list[str]:
    """What the answer text states that none of its verified quotes does, in plain words (empty
    when everything is backed): "number 900", "unit “hours”", "a negation", "name “Cessna”".
    ``question``: what was asked, so the "No" answering a yes/no question is not taken for a claim;
    ``pages``: the shown text of the pages the verified quotes are on, which back a name the question
    states too; ``documents``: the names of the documents quoted, which back the names they are named
    after (``names_document``)."""
    joined = "\n".join(normalize(q) for q in quotes)
    text = without_list_markers(text)
    problems = [f"number {n}" for n in unquoted_numbers(text, quotes)]
    undotted = joined.replace(".", "")  # "m.p.h." is "mph"
    problems += [f"unit “{u}”" for u in stated_units(text, profile)
                 if not any(_has_words(f, joined) or _has_words(f.replace(".", ""), undotted) for f in _unit_forms(u))]
    asks_yes_no = bool(question) and yes_no(question)
    claim = _without_yes_no(text) if asks_yes_no else text
    # a question about what is prohibited or not done ("Where is aerobatic flight prohibited?") is
    # answered in negations that restate it; a yes/no question's own negation backs nothing
    restated = bool(question) and not asks_yes_no and negates(question, profile)
    if any(_BOUND.search(normalize(q)) for q in quotes):
        claim = _NO_BOUND.sub(" ", normalize(claim))
    claim_negates = negates(claim, profile)
    raw_quotes = "\n".join(quotes)
    # a bare "No", with no negation after it, about a name the question asks of and no quote mentions, is
    # read from what the quotes leave out ("Can I call it from Fortran?" / "No. The manual lists C++, C,
    # Python and Julia"); a "No" about what the quotes do speak of ("Is a light always required?" / "No,
    # only at night" over "required when flying at night") is their own restriction
    # (a name the quoted document is named after is mentioned: "Can HMMER …?" over hmmer-userguide.pdf)
    bare_no = (not claim_negates and asks_yes_no and _OPENING_NO.match(text) is not None
               and any(not mentions(t, question, raw_quotes) and not names_document(t, documents)
                       for t in specific_terms(question, profile)))
    if ((claim_negates and not restated and not restates_premise(claim, question, profile)) or bare_no) \
            and not any(negates_or_excludes(q, profile) for q in quotes):
        problems.append("a negation")
    spelled = _abbreviated(text, joined) | _part_spelled(text, raw_quotes)
    same = _same_letters(text, raw_quotes)
    asked, on_pages = normalize(question), "\n".join(normalize(p) for p in pages)
    keys = _CARET_KEY.sub(r"ctrl-\1", raw_quotes)
    problems += [f"name “{t}”" for t in specific_terms(text, profile)
                 if t not in spelled and not mentions(t, text, keys)
                 and not names_document(t, documents)
                 and not (set(_ALNUM.findall(normalize(t))) <= same)
                 and not (_has_words(normalize(t), asked) and _has_words(normalize(t), on_pages))]
    return problems


def rests_on_absence(text: str, question: str, problems: Sequence[str]) -> bool:
    """A "No" to a yes/no question (``yes_no``) whose negation no verified quote states (``problems``
    from ``unsupported`` holds "a negation"): the "no" was read from what the quotes leave out ("No:
    the drivers are CSV, xBASE, ODBC and MySQL" to "Can it read .xlsx?"), which is not an answer."""
    return "a negation" in problems and yes_no(question) and _OPENING_NO.match(text) is not None

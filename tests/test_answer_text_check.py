"""Issue 38, item 5: the answer-text check keeps its true alarms and drops its false ones.

A model's own answer text is shown only when its verified quotes back every number, unit, negation
and name in it (``retrieval.answer.answerers.model.support.unsupported``). What a quote states in
other form is no alarm: a list's item numbers ("1) … 2) …"), a name in other case, split, joined,
singular or plural, or spelt out by the words its CamelCase parts begin ("RelTol" / "relative
tolerance"), a negation a quote makes with "unless", "except", "nothing" or another form of the word.
What no quote states still withholds the text: a changed number, an added unit, a name whose letters
no quote has, a "not" no quote carries.

The last tests go through the real model answerer: the real ``openai`` client against
``tests/fake_openai.py`` on 127.0.0.1, the dev collection in a real Postgres.
"""

from __future__ import annotations

import pytest

from retrieval.answer.answerers.model.support import list_markers, mentions, rests_on_absence, unsupported, yes_no
from retrieval.answer.ask import ask
from tests import fake_openai as fo
from tests.fake_gemini import Reply
from tests.test_gemini_failures import QUESTION, quote_from

RTOL = "The relative tolerance of the integrator defaults to 1e-8 and the absolute tolerance to 1e-10."


# --- false alarms: shown now -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "quote"), [
    ("Two steps: 1) run configure, 2) run make.", "first run configure and then run make"),
    ("(1) Run configure. (2) Run make. (3) Run make install.", "run configure, run make and run make install"),
    ("Steps:\n1. Run configure.\n2. Run make.", "first run configure and then run make"),
    ("1) During the day, 30 minutes; 2) at night, 45 minutes.",
     "(1) During the day, to fly after that for at least 30 minutes; or (2) At night, for at least 45 minutes."),
    ("Twice: 1) A then 2) B. Then again: 1) C and 2) D.", "do A, then B; then C, then D"),
])
def test_a_lists_item_numbers_are_not_numbers_it_states(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == []


@pytest.mark.parametrize(("text", "quote"), [
    ("Set RelTol to 1e-8.", RTOL),  # CamelCase parts begin the quote's words
    ("Set Rel_Tol to 1e-8.", RTOL),  # snake_case parts, too
    ("Set RelTol to 1e-8.", "reltol: the relative tolerance, by default 1e-8"),  # another case
    ("Set RelTol to 1e-8.", "rel_tol gives the relative tolerance (default 1e-8)"),  # split by "_"
    ("Set Rel Tol to 1e-8.", "reltol gives the relative tolerance (default 1e-8)"),  # the text splits it
    ("Use BASH_XTRACEFD to send the trace to another file.", "If set, BASH_XTRACEFD names the file descriptor"),
    ("Set the Relative Tolerance to 1e-8.", "the option RelTol, 1e-8 by default"),  # the other way round
    ("Only Tasks A and B are required.", "Task A and Task B are required"),  # plural / singular
    ("The FlowableDerived class is used.", "a flowable-derived class is used"),
])
def test_a_name_written_another_way_is_the_same_name(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == []


@pytest.mark.parametrize(("text", "quote"), [
    ("It is not allowed once the authorization is withdrawn.",
     "operation is allowed unless the Administrator withdraws the authorization"),
    ("It does not apply to gliders.", "this section applies to all aircraft except gliders"),
    ("It is not allowed at night.", "the prohibition applies at night"),  # another form of "prohibited"
    ("Nothing is printed when it is not set.", "when unset, nothing is printed"),
    ("It is not only fast but also safe.", "it is fast and it is safe"),  # "not only": no negation
    ("It works whether or not the file exists.", "it works when the file exists and when it is missing"),
    ("See Form No. 8710.", "send Form 8710 to the registry"),  # "No." of a number
])
def test_a_negation_a_quote_makes_in_other_words_is_backed(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == []


def test_digits_glued_to_a_names_letters_are_the_name_not_a_number() -> None:
    """"why3 prove" states no number 3: the digit is part of the tool's name, checked as a name. A name
    with other digits than the quotes' is still an alarm, and a bare number still is one."""
    quote = "By default, the limit is set to 10 seconds."
    assert unsupported("By default why3 prove allows 10 seconds.", [quote], documents=["why3-manual.pdf"]) == []
    assert unsupported("By default why3 prove allows 10 seconds.", [quote]) == ["name “why3”"]
    assert unsupported("By default why4 prove allows 10 seconds.", [quote], documents=["why3-manual.pdf"]) == [
        "name “why4”"]
    assert unsupported("By default it allows 3 seconds.", [quote]) == ["number 3"]
    # nor does a number start inside the digits glued to a name: "s01" states no number 1
    assert unsupported("Step s01 allows 10 seconds.", [quote, "Step s01 is the first."]) == []
    assert unsupported("Step s01 allows 10 seconds.", [quote]) == ["name “s01”"]


def test_a_number_after_a_names_glued_digits_is_that_name() -> None:
    """"G18.10" states no bare number 10 (unseen 31's u29, a false alarm): the digits after the dot go on the
    name's glued digits and are compared as the whole name, so another version of it is still an alarm."""
    quote = "Real numbers written as ASCII data should be formatted with the G18.10 specifier."
    assert unsupported("Format them with the G18.10 specifier.", [quote]) == []
    assert "number g18.12" in unsupported("Format them with the G18.12 specifier.", [quote])
    assert "number python3.12" in unsupported("It needs python3.12.", ["It needs python3.11 or later."])
    assert unsupported("It needs python3.11.", ["It needs python3.11 or later."]) == []


@pytest.mark.parametrize(("name", "document"), [
    ("SBCL", "sbcl.pdf"),
    ("MrBayes", "Manual_MrBayes_v3.2.pdf"),
    ("CircuiTikZ", "circuitikzmanual.pdf"),
    ("TikZ", "circuitikzmanual.pdf"),  # a part of the document's name, four letters or more
    ("AMC", "auto-multiple-choice.en.pdf"),  # an acronym its words spell out
    ("GAP", "gap-tutorial.pdf"),  # a word of a hyphenated name, which normalize would join to the next
])
def test_a_name_the_quoted_document_is_named_after_is_its_subject(name: str, document: str) -> None:
    quote = "Reads the file and prints the table."
    assert unsupported(f"In {name} it reads the file.", [quote], documents=[document]) == []
    assert unsupported(f"In {name} it reads the file.", [quote], documents=["other-manual.pdf"]) == [
        f"name “{name.lower()}”"]


def test_adjacent_quotes_are_checked_as_shown_with_the_page_text_between_them() -> None:
    """Two quotes a few words apart on one page are shown as one; a name in the words between them
    (what the reader sees) backs the text."""
    from retrieval.answer.answerers.model.checks import join_adjacent
    from retrieval.answer.verify import PageText
    from retrieval.models import Citation
    page = PageText(document="ide.pdf", page=7, text="never save on exit: you must use menu File → Save session, "
                    "or the state is lost. ask whether to save: a popup asks.")
    cites = [Citation(document="ide.pdf", page=7, quote="never save on exit: you must use menu"),
             Citation(document="ide.pdf", page=7, quote="or the state is lost.")]
    text = "With never save on exit you must use File → Save session."
    assert unsupported(text, [c.quote for c in cites]) == ["name “file”"]
    assert unsupported(text, [c.quote for c in join_adjacent(cites, [page])]) == []


def test_a_quote_that_introduces_an_example_is_shown_with_it() -> None:
    """A model's quote ending "…, for example:" is shown with the example line it introduces (the page's own
    words, from the shown text; unseen 28, t18), never with a heading that follows instead."""
    from retrieval.answer.answerers.model.checks import lead_ins_continued
    from retrieval.answer.verify import PageText, locate
    from retrieval.models import Citation
    text = ("All programs using MPFR must link against both libmpfr and libgmp libraries. On a typical Unix-like\n"
            "system this can be done with '-lmpfr -lgmp' (in that order), for example:\n\n"
            "gcc myprogram.c -lmpfr -lgmp\n\n"
            "Note that the MPFR library is installed by default.")
    page = PageText(document="mpfr.pdf", page=10, text=text)
    lead = Citation(document="mpfr.pdf", page=10,
                    quote="On a typical Unix-like system this can be done with '-lmpfr -lgmp' (in that order), for example:")
    other = Citation(document="mpfr.pdf", page=10, quote="Note that the MPFR library is installed by default.")
    shown = lead_ins_continued([lead, other], [page])
    assert " ".join(shown[0].quote.split()).endswith("for example: gcc myprogram.c -lmpfr -lgmp")
    assert locate(shown[0].quote, text) is not None and shown[1] == other  # verbatim; the other quote unchanged
    example = Citation(document="mpfr.pdf", page=10, quote="gcc myprogram.c -lmpfr -lgmp")
    assert lead_ins_continued([lead, other, example], [page]) == shown  # the example line is not shown twice
    heading = PageText(document="mpfr.pdf", page=11, text=text.replace("gcc myprogram.c -lmpfr -lgmp",
                                                                        "REPORTING BUGS AND GETTING HELP"))
    before = lead.model_copy(update={"page": 11})
    assert lead_ins_continued([before], [heading]) == [before]  # a heading is not what the lead-in introduces


@pytest.mark.parametrize(("text", "quote", "question"), [
    ("Not by default: it compares character codes.", "a character code comparison rather than locale ordering",
     "Will it sort accented names in dictionary order?"),
    ("It does not read the file; it uses the cache.", "it uses the cache instead of the file", ""),
    ("Yes: set WHY3IDE to web. No X server is needed.", "set WHY3IDE to web to run it from a web browser",
     "There is no X server on my machine. Can I still use the IDE?"),  # the question's own statement, restated
])
def test_a_negation_said_by_rather_than_instead_of_or_the_askers_own_statement_is_backed(
        text: str, quote: str, question: str) -> None:
    assert unsupported(text, [quote], question=question) == []


def test_a_key_in_caret_notation_is_the_ctrl_key() -> None:
    assert unsupported("Press Ctrl-U to delete the entire line.", ["^U\ndelete the entire line."]) == []
    assert unsupported("Press Ctrl-W to delete the entire line.", ["^U\ndelete the entire line."]) == [
        "name “ctrl-w”"]


# --- true alarms: still withheld -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "quote", "problems"), [
    ("Set RelTol to 1e-9.", RTOL, ["number 9", "name “1e-9”"]),  # a changed number
    ("1) configure, 2) make, 3) wait 15 minutes.", "first run configure and then run make", ["number 15", "unit “minutes”"]),
    ("It is 250 knots. 2. Not more.", "more than 250 knots", ["number 2", "a negation"]),  # "2." is no list item
    ("At most 3 (3) passes.", "run make then make install", ["number 3"]),  # a lone "(3)" counts nothing
    ("1) 900 knots, 2) 250 knots.", "more than 250 knots", ["number 900"]),  # a number inside a list item
])
def test_a_number_no_quote_states_still_withholds(text: str, quote: str, problems: list[str]) -> None:
    assert unsupported(text, [quote]) == problems


@pytest.mark.parametrize(("text", "quote", "problems"), [
    ("It takes 45 hours.", "fly after that for at least 45 minutes", ["unit “hours”"]),
    ("Set AbsTol to 1e-8.", RTOL.replace("absolute", "total"), ["name “abstol”"]),  # parts begin no quote words
    ("Set RelTol to 1e-8.", "the tolerance of the integrator defaults to 1e-8", ["name “reltol”"]),
    ("A Cessna needs 45 minutes.", "fly after that for at least 45 minutes", ["name “cessna”"]),
    ("Use BASH_XTRACEFD to trace.", "If set, BASH_ENV names a startup file", ["name “xtracefd”"]),
    ("Only Tasking A and B is required.", "Task A and Task B are required", ["name “tasking”"]),  # no form of "task"
    ("Under the Sea-Rat rule it is 45 minutes.", "under the sea rating rule, 45 minutes",
     ["name “sea-rat”"]),  # a hyphenated word's parts are no abbreviation
])
def test_a_unit_or_name_no_quote_states_still_withholds(text: str, quote: str, problems: list[str]) -> None:
    assert unsupported(text, [quote]) == problems


@pytest.mark.parametrize(("text", "quote"), [
    ("A plain reset does not delete variables.", "reset returns the graph settings to their defaults"),
    ("It is not required at night.", "it is required only at night"),  # "only" backs no "not"
    ("It is not only required but not allowed.", "it is required"),  # a "not" beside the idiom
    ("It is required or not allowed.", "it is required or allowed"),
])
def test_a_negation_no_quote_carries_still_withholds(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == ["a negation"]


@pytest.mark.parametrize(("text", "question"), [
    ("It needs no X server.", "Does the IDE need no X server?"),  # asked, not stated
    ("Yes. An X server is not needed.", "There is no X server on my machine. Can I use the IDE?"),  # other words
    ("Yes. It needs no display.", "There is no X server here. Can I use the IDE?"),
])
def test_a_negation_the_question_only_asks_about_or_states_of_something_else_still_withholds(
        text: str, question: str) -> None:
    assert unsupported(text, ["run it from a web browser"], question=question) == ["a negation"]


@pytest.mark.parametrize(("text", "quote"), [
    ("You cannot write it directly.", "it is impossible to express ranged constraints in this format"),
    ("The driver can't read it.", "the driver is unable to read compressed files"),
    ("Plan no more frames than minutes.", "you should have at most one frame per minute"),  # a bound
    ("Wait no less than 5 minutes.", "wait a minimum of 5 minutes"),
])
def test_a_cannot_or_a_bound_a_quote_states_in_other_words_is_backed(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == []


@pytest.mark.parametrize(("text", "quote"), [
    ("Use no more than 3 engines.", "more than 3 engines are required"),  # a flipped bound: the quote has none
    ("It cannot be read.", "the driver reads compressed files"),
])
def test_a_bound_or_cannot_with_nothing_behind_it_still_withholds(text: str, quote: str) -> None:
    assert unsupported(text, [quote]) == ["a negation"]


@pytest.mark.parametrize(("question", "asks"), [
    ("Is a transponder required in Class C airspace?", True),
    ("After upgrading SBCL, can I keep loading my old .fasl files?", True),
    ("If I write results with a CSV table, will records be appended?", True),
    ("I use a Multiple Master font with XeTeX. Will fontspec pick the size?", True),
    ("How do I detect a failed call? Do functions return -1 like in C?", True),
    ("Aren't variables non-negative by default?", True),
    ("What is the maximum airspeed below 10,000 feet MSL?", False),
    ("In Class E airspace, what visibility applies?", False),
    ("How is the island of Doris named?", False),
    ("Over what kinds of places, and below what height, is aerobatic flight prohibited?", False),
    ("In SizeFeatures, which sizes does X-Y cover, and is the upper bound included?", False),
])
def test_a_question_asks_yes_or_no_when_a_clause_opens_with_its_verb(question: str, asks: bool) -> None:
    assert yes_no(question) is asks


def test_the_no_answering_a_yes_no_clause_is_no_claim() -> None:
    q = "After upgrading SBCL, can I keep loading the .fasl files my previous version compiled?"
    text = "No. Fasl files are binary compatible only with the exact SBCL version that generated them."
    quote = "SBCL fasl-format is binary compatible only with the exact SBCL version it was generated with."
    assert unsupported(text, [quote], question=q) == []
    assert unsupported(text, [quote]) == ["a negation"]  # without the question, "No" is a claim


def test_a_wh_question_about_what_is_prohibited_is_answered_in_negations_that_restate_it() -> None:
    q = "Over what kinds of places, and below what height, is aerobatic flight prohibited?"
    text = "No aerobatic flight is allowed over a congested area or below 1,500 feet."
    quote = "operate an aircraft in aerobatic flight over any congested area; below an altitude of 1,500 feet"
    assert unsupported(text, [quote], question=q) == []


def test_a_no_read_from_what_a_list_leaves_out_rests_on_absence() -> None:
    q = "Can a table statement read an Excel .xlsx workbook?"
    text = "No. There are four table drivers: CSV, xBASE, ODBC and MySQL; none reads that format."
    quote = "Currently the package has four table drivers: CSV, xBASE, ODBC and MySQL."
    problems = unsupported(text, [quote], question=q)
    assert problems == ["a negation"] and rests_on_absence(text, q, problems)
    stated = "No. Fasl files are not compatible across versions."
    backed = unsupported(stated, ["fasl files are not compatible across versions"], question=q)
    assert backed == [] and not rests_on_absence(stated, q, backed)  # a quote says the "no"
    yes = "Yes, but none of the drivers is fast."
    assert not rests_on_absence(yes, q, unsupported(yes, [quote], question=q))  # no "No"
    bare = "No. The drivers it has are CSV, xBASE, ODBC and MySQL."  # a "No" with no negation after it,
    problems = unsupported(bare, [quote], question=q)  # about "Excel", which no quote mentions
    assert problems == ["a negation"] and rests_on_absence(bare, q, problems)
    excel = "Currently the package has four table drivers: CSV, xBASE, ODBC and MySQL; Excel files go through ODBC."
    assert unsupported(bare, [excel], question=q) == []  # the quotes speak of Excel: their own answer
    what = "What drivers are there?"
    assert not rests_on_absence("No driver reads it.", what, unsupported("No driver reads it.", [quote], question=what))


def test_a_bare_no_about_a_hyphenated_name_or_the_documents_own_subject_is_the_quotes_answer() -> None:
    """Round 7's z01, decided on made-up text: the question's "BLASTX-style" is one word "blastxstyle" once
    ``normalize`` joins the hyphen, and "HMMER" is what the quoted document is named after; the quotes name
    BLASTX, so a bare "No" is their answer, not one read from what they leave out. A name no quote
    mentions ("Excel") still makes the "No" rest on absence."""
    q = "I want protein domains in DNA contigs BLASTX-style. Can HMMER search the translated DNA directly?"
    quote = "I'd love to have the HMM equivalents of BLASTX. In the meantime, I translate DNA sequence to six frames."
    bare = "No. Translate the DNA to six frames and search the frames as proteins."
    assert unsupported(bare, [quote], question=q, documents=["hmmer-userguide.pdf"]) == []
    problems = unsupported(bare, [quote], question=q, documents=["other.pdf"])
    assert problems == ["a negation"] and rests_on_absence(bare, q, problems)  # "HMMER" is nowhere
    excel = "Can HMMER read an Excel-style sheet of DNA?"
    assert unsupported(bare, [quote], question=excel, documents=["hmmer-userguide.pdf"]) == ["a negation"]


def test_a_name_a_quote_writes_inside_a_hyphenated_word_is_stated() -> None:
    """Round 7's w05: "LMDB" in the text, "LMDB-specific" in the quote. Each run of name parts counts as
    consecutive words only: "PA-28" is not mentioned by "PA-32 … 28 knots"."""
    quote = "These options are LMDB-specific and are ignored by other back ends."
    assert unsupported("The LMDB back end reads them.", [quote]) == []
    assert not mentions("pa-28", "The PA-28 cruises", "the PA-32 cruises at 28 knots")
    assert mentions("pa-28", "The PA-28 cruises", "the PA 28 cruises") and mentions("pa-28", "PA-28", "a PA-28")
    assert unsupported("The Lycoming engine is used.", [quote]) == ["name “lycoming”"]


def test_a_name_the_question_states_is_backed_by_the_quoted_page_not_by_the_question_alone() -> None:
    """FAA dev d004/d005: "In Class E airspace ..." over a table row of §91.155 whose page names Class E
    and VFR in its heading and text; the question asked about Class E. A false premise ("the Cessna 172")
    that only the question states still withholds, and so does a name only the page states."""
    quote = "At or above 10,000 feet MSL 5 statute miles 1,000 feet below"
    page = "§91.155 Basic VFR weather minimums.\nClass E:\n" + quote
    question = "What VFR visibility is needed in Class E airspace at or above 10,000 feet MSL?"
    text = "In Class E airspace at or above 10,000 feet MSL the VFR minimum is 5 statute miles."
    assert unsupported(text, [quote]) == ["name “class”", "name “vfr”"]
    assert unsupported(text, [quote], question=question, pages=[page]) == []
    premise = "What is the never-exceed speed of the Cessna 172?"
    poh = "VNE never exceed speed | 149 | Do not exceed this speed in any operation"
    assert unsupported("The Cessna 172's VNE is 149.", [poh], question=premise, pages=[poh]) == [
        "number 172", "name “cessna”"]
    assert unsupported(text, [quote], question="What is the visibility minimum?", pages=[page]) == [
        "name “class”", "name “vfr”"]


@pytest.mark.parametrize("text", [
    "Two steps. 1) Create the entry with add_principal. 2) Run bos adduser to add admin to the UserList file.",
    "Steps: (1) Create the entry with add_principal; (2) Run bos adduser to add admin to the UserList file.",
    "Steps:\n1. Create the entry with add_principal.\n2. Run bos adduser to add admin to the UserList file.",
])
def test_a_list_items_first_word_is_not_a_name(text: str) -> None:
    """"2) Run bos adduser": a step's first word is capitalised because it starts the step (unseen 27, s15)."""
    quotes = ["Issue the add_principal command to create the entry.",
              "Issue the bos adduser command to add the admin user to the UserList file."]
    assert unsupported(text, quotes) == []
    assert unsupported(text.replace("UserList", "UserList on Zephyr"), quotes) == ["name “zephyr”"]  # a name still is one


@pytest.mark.parametrize(("text", "quote", "problems"), [
    ("The minimum is 1 bit.", "The precision is the number of bits; MPFR_PREC_MIN is equal to 1.", []),
    ("It lasts 2 hours.", "a lease of 2 hour", []),
    ("It lasts 2 days.", "a lease of 2 hours", ["unit “days”"]),  # another unit is still one no quote states
    ("It is 3 m long.", "3 ms", ["unit “m”"]),  # a unit of one or two letters has no other form
])
def test_a_unit_in_its_other_number_is_stated(text: str, quote: str, problems: list[str]) -> None:
    assert unsupported(text, [quote]) == problems


def test_list_markers_count_from_one() -> None:
    text = "Do 1) this, 2) that; it takes 3 hours (at most 3)."
    assert [text[a:b] for a, b in list_markers(text)] == ["1", "2"]
    assert list_markers("Only (2) applies.") == []


# --- through the real model answerer ---------------------------------------------------------------

NEEDLE = "indicated airspeed of more than 250 knots (288 m.p.h.)"


# the fake OpenAI-compatible server and settings pointing the real client at it: test_openai_failures'
from tests.test_openai_failures import fake, osettings  # noqa: E402,F401  (pytest fixtures)


def answered_with(osettings, fake: fo.FakeOpenAI, text: str):
    fake.script(lambda rec: Reply(200, fo.answer_body(text, [quote_from(rec, NEEDLE, before=60)])))
    a = ask(osettings, QUESTION, collections=["dev"])
    assert not a.refusal and a.answerer == "openai" and len(fake.requests) == 1, (a.reason, a.warnings)
    assert a.citations and NEEDLE in " ".join(a.citations[0].quote.split())
    return a


@pytest.mark.parametrize("text", [
    "The IndAirspeed limit below 10,000 feet MSL is 250 knots (288 mph).",  # CamelCase of "indicated airspeed"
    "The IndicatedAirspeed limit below 10,000 feet MSL is 250 knots (288 mph).",  # the same letters joined
    "Two figures: 1) 250 knots, 2) 288 mph.",  # a list's item numbers
])
def test_the_user_sees_the_models_text_when_its_quote_says_it_in_other_form(osettings, fake, text) -> None:
    a = answered_with(osettings, fake, text)
    assert a.answer == text and not a.withheld and not a.withheld_text
    assert not any("withheld" in w for w in a.warnings), a.warnings


@pytest.mark.parametrize(("text", "problem"), [
    ("The IndAirspeed limit below 10,000 feet MSL is 900 knots.", "number 900"),  # an invented number
    ("The TrueAirspeed limit below 10,000 feet MSL is 250 knots.", "name “trueairspeed”"),  # a name no quote has
    ("1) 250 knots, 2) 288 mph, 3) 15 knots in gusts.", "number 15"),
])
def test_the_user_sees_the_quote_alone_when_the_text_states_what_no_quote_does(osettings, fake, text,
                                                                             problem) -> None:
    a = answered_with(osettings, fake, text)
    assert a.withheld_text == text and problem in a.withheld
    assert a.answer == " ".join(a.citations[0].quote.split())  # the verified quote alone
    assert any("withheld" in w and problem in w for w in a.warnings), a.warnings


YES_NO = "Is the maximum indicated airspeed below 10,000 feet MSL 300 knots for turbine airplanes?"


def test_a_no_that_no_quote_states_is_a_refusal_that_leads_with_the_quoted_page(osettings, fake) -> None:
    """A model answering "No" to a yes/no question with a quote that says nothing of the kind: the user
    sees a refusal (the documents do not say), its nearest page the page of the quote, not a "No"."""
    quoted = answered_with(osettings, fake, "The limit is 250 knots (288 mph).").citations[0]
    fake.requests.clear()
    text = "No. The limit below 10,000 feet MSL is 250 knots; no other figure is given."
    fake.script(lambda rec: Reply(200, fo.answer_body(text, [quote_from(rec, NEEDLE, before=60)])))
    a = ask(osettings, YES_NO, collections=["dev"])
    assert a.refusal and not a.citations and a.answer == "", (a.answer, a.reason)
    assert len(fake.requests) == 1  # refused as it stands: no second call
    assert "leave out" in a.reason and a.withheld == ["a negation"] and a.withheld_text == text
    assert (a.nearest[0].document, a.nearest[0].page) == (quoted.document, quoted.page)

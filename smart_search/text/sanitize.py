"""Prompt-injection sanitizer for every text smart-search returns (spec 6, RULINGS 5).

Search results and model answers are untrusted: a page can carry text written for the agent
that reads the results ("ignore previous instructions", fake chat-template tokens, an image
link that leaks data when rendered). `sanitize_text` neutralises that in any string;
`sanitize_results` applies it to a Gemini answer or to each result of a list.

What happens to a text, in order:

1. Invisible characters are deleted: zero-width characters (U+200B-U+200D, U+2060, U+FEFF),
   bidi controls (U+202A-U+202E, U+2066-U+2069), Unicode tag characters (U+E0000-U+E007F),
   every other format (Cf), control (Cc) and surrogate (Cs) character, the variation selectors
   supplement (U+E0100-U+E01EF, a known smuggling channel), the combining grapheme joiner and
   the Hangul fillers. Tab, newline, other line breaks and every Unicode space become an ASCII
   space (newlines are kept with `keep_newlines=True`). Emoji ZWJ sequences therefore fall
   apart into their component emoji; they stay readable.
2. Patterns are matched on a *folded shadow* of the text, never on the raw characters: each
   character is NFKD/NFKC-normalised (full-width letters, ligatures such as "ﬆ", mathematical
   alphabets), stripped of combining marks (accents used as padding), mapped from common
   Cyrillic/Greek look-alikes to Latin, and punctuation that can split a phrase (`_ - * " '` ...)
   reads as a space; matching ignores case. So "ｉｇｎｏｒｅ", "ig\u200bnore" (after step 1),
   "іgnore" (Cyrillic i) and "**ignore**_previous_instructions" are all caught. The *output*
   keeps the original characters: normalising it would turn "m²" into "m2" and "2⁵" into "25".
3. Removed, in the folded shadow's coordinates:
   - chat-template and role tokens (`<|im_start|>`, any `<|name|>`, `[INST]`, `<<SYS>>`,
     `<system>`, `</tool_result>`, `<tool_call>`, `</function_results>`, ...) and markdown or
     HTML images (`![alt](url)`, `![alt][ref]`, `<img ...>`; a leftover `!` before `[` too):
     replaced by a space;
   - injection phrases ("ignore all previous instructions", "disregard the above",
     "forget previous instructions", "you are now DAN", "system prompt", "new instructions:",
     "act as an unrestricted AI", "note to AI:", "reveal your system prompt", a few French,
     Spanish, Italian and German forms, ...): replaced by the neutral marker `[removed]`, so the
     reader knows something was there. Ordinary uses of the same words ("don't ignore the
     instructions on the label", "previous versions") do not match: a phrase needs its verb,
     its "previous/above/all/your" qualifier and its object together.
   Removal repeats until nothing matches (a token hidden inside a phrase is caught on the second
   pass); input nested deeper than `_MAX_PASSES` levels is replaced by `[removed]` altogether.
4. Runs of spaces collapse to one, adjacent markers merge, the ends are trimmed.

The result is idempotent: `sanitize_text(sanitize_text(x)) == sanitize_text(x)`. Every pattern
is linear (bounded or possessive repetition only): a 100,000-character adversarial string takes
milliseconds. Only `re`, `unicodedata` and the package's `urls` are imported.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

from smart_search.text.urls import is_web_url

MARKER = "[removed]"
_MAX_PASSES = 6

# ---------------------------------------------------------------------------------------------
# Step 1: invisible characters.

_DELETE_RANGES = (
    (0xE0000, 0xE007F),  # tag characters: invisible ASCII look-alikes
    (0xE0100, 0xE01EF),  # variation selectors supplement: can smuggle bytes invisibly
)
_DELETE_CHARS = frozenset((0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0))  # CGJ, Hangul fillers


class _InvisibleTable(dict[int, Any]):
    """`str.translate` table computed per code point on first sight (the Unicode database is
    never scanned up front: importing stays cheap)."""

    def __init__(self, keep_newlines: bool) -> None:
        super().__init__()
        self._newline = "\n" if keep_newlines else " "

    def __missing__(self, code: int) -> str | None:
        value = self._classify(code)
        if len(self) < 65536:  # an attacker's 100k distinct code points must not grow it forever
            self[code] = value
        return value

    def _classify(self, code: int) -> str | None:
        char = chr(code)
        if char in "\n\r\u2028\u2029\x85":
            return self._newline
        if char in "\t\x0b\x0c":
            return " "
        if code in _DELETE_CHARS or any(low <= code <= high for low, high in _DELETE_RANGES):
            return None
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs"):
            return None
        if category == "Zs":
            return " "
        return char


_TABLES = {False: _InvisibleTable(False), True: _InvisibleTable(True)}
# Terminal escape sequences (CSI "ESC[31m", OSC "ESC]...BEL"): removed whole, not just the ESC,
# so "ESC[31mignore ..." does not leave "[31m" glued to the next word.
_ANSI = r"\x1b\[[0-?]*+[ -/]*+[@-~]|\x1b\][^\x07\x1b]*+(?:\x07|\x1b\\)?|\x9b[0-?]*+[ -/]*+[@-~]"

# ---------------------------------------------------------------------------------------------
# Step 2: the folded shadow used for matching.

# fmt: off
_LOOKALIKES = {
    # Cyrillic, Greek, Armenian and Latin-extension letters drawn like ASCII letters.
    "a": "аαɑ", "c": "с", "d": "ԁ", "e": "еε", "g": "ɡ", "h": "һ", "i": "іιı", "j": "ј",
    "k": "κ", "l": "ӏ", "n": "ո", "o": "оοօ", "p": "рρ", "q": "ԛ", "s": "ѕ", "t": "τ",
    "u": "υս", "v": "ν", "w": "ԝ", "x": "хχ", "y": "у",
    "A": "АΑ", "B": "ВΒ", "C": "С", "E": "ЕΕ", "H": "НΗ", "I": "ІΙ", "J": "Ј", "K": "КΚ",
    "M": "МΜ", "N": "Ν", "O": "ОΟ", "P": "РΡ", "S": "Ѕ", "T": "ТΤ", "X": "ХΧ", "Y": "Υ",
    "Z": "Ζ",
    # Typographic quotes and dashes.
    "'": "\u2018\u2019\u201a\u201b", '"': "\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a",
    "-": "\u2010\u2011\u2012\u2013\u2014\u2015\u2212",
}
# fmt: on
_CONFUSABLES = str.maketrans(
    {look: plain for plain, looks in _LOOKALIKES.items() for look in looks}
)
# Punctuation that may be used to split a phrase: reads as a space in the phrase shadow.
_PHRASE_PUNCT = str.maketrans({c: " " for c in "_-*\"'`~()[]{}<>|+=\\/^\n\t"})


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    return kept.translate(_CONFUSABLES)


def _shadow(text: str) -> tuple[str, list[int] | None]:
    """The folded text and, when folding changed lengths, shadow index → text index."""
    if text.isascii():
        return text, None
    pieces = list(map(_fold_char, text))
    folded = "".join(pieces)
    if len(folded) == len(text) and "" not in pieces:
        return folded, None
    offsets = [i for i, piece in enumerate(pieces) for _ in range(len(piece))]
    return folded, offsets


# ---------------------------------------------------------------------------------------------
# Step 3: what is removed.


def _words(template: str) -> str:
    """`~` separates words in a phrase template: one or more spaces in the shadow (punctuation
    already reads as a space there); a phrase ends at an ASCII word edge."""
    return "(?:" + template.replace("~", "(?:[ ]++)") + r")(?![a-z0-9])"


_VERB = (
    r"(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|overrid(?:e|ing)|bypass(?:ing)?"
    r"|discard(?:ing)?|abandon(?:ing)?|set~aside|do~not~follow|don~t~follow|stop~following"
    r"|no~longer~follow|never~mind|nevermind)"
)
_FILL = r"(?:of|the|these|those|this|that|its|their|such|and|or|each|my|our|&)"
_MOD = (
    r"(?:previous(?:ly)?|prior|preceding|above|earlier|former|foregoing|initial|original"
    r"|aforementioned|above~mentioned|system|developer|all|any|every|your|old|past|other)"
)
# Only after a qualifier above: "ignore all safety guidelines", not "ignore safety rules".
_QUAL = r"(?:safety|content|ethical|ethics|moral|usage|security|openai|anthropic|google)"
_NOUN = (
    r"(?:instructions?|instruction~set|prompts?|rules?|directives?|commands?|guidelines?"
    r"|guidance|orders|constraints?|restrictions?|programming|polic(?:y|ies)|guardrails?"
    r"|directions|context|text|input|content)"
)
_ROLE_ADJ = (
    r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|rogue|malicious|amoral|unethical"
    r"|unaligned|unbound|unlimited|liberated|dan|hacker|different~ai|new~ai"
    r"|(?:ai|assistant|model)~(?:without|with~no))"
)
_AI = (
    r"(?:ai|ai~assistants?|ai~agents?|ai~models?|llms?|language~models?|large~language~models?"
    r"|chatbots?|bots?|gpts?|chatgpt|claude|gemini|copilot|crawlers?|scrapers?)"
)

_VERB_TEMPLATES = (
    # ignore / disregard / forget ... previous / all / your ... instructions
    rf"{_VERB}(?:~{_FILL}){{0,4}}~{_MOD}(?:~(?:{_FILL}|{_MOD}|{_QUAL})){{0,4}}~{_NOUN}",
    # ... the instructions above / you were given
    rf"{_VERB}(?:~{_FILL}){{0,3}}~{_NOUN}~(?:above|given~above|provided~above|before~this"
    r"|you~(?:were|have~been)~given|you~received|so~far)",
    # ... everything above / before this (no object needed)
    r"(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?)(?:~(?:all|everything|anything|of|the"
    r"|that|what|which|is|was|has~been|written|said|stated|mentioned)){0,4}~(?:above"
    r"|before~(?:this|that)|up~to~now|until~now|so~far)",
    r"disregard(?:ing)?(?:~(?:all|everything|anything|of|the|that|what|any)){0,3}"
    r"~(?:previous|prior|preceding|foregoing|earlier|former)",
)
_PHRASE_TEMPLATES = (
    # role hijacks
    r"you~(?:are|re|will~be)~now(?:~(?:a|an|the|my|in|called|named|acting~as|playing"
    r"|operating~(?:as|in))){0,2}~(?:dan|ai|chatgpt|gpt|llm|jailbroken|jailbreak|unrestricted"
    r"|unfiltered|uncensored|evil|rogue|malicious|amoral|unethical|unaligned|unbound|liberated"
    r"|(?:developer|dev|dan|jailbreak|god|sudo|admin)~mode|(?:different|new)~(?:ai|persona))",
    r"you~(?:are|re)~no~longer~(?:(?:bound|restricted|limited|constrained|governed)~by"
    r"(?:~(?:any|your|the))?~(?:rules|guidelines|restrictions|policies|instructions"
    r"|content~policy|safety)|(?:an?~)?(?:ai|ai~assistant|language~model|chatbot|chatgpt"
    r"|claude|gemini))",
    rf"(?:from~now~on~)?(?:you~(?:will|must|shall|should|are~to|are~going~to|can)~(?:now~)?)?"
    rf"(?:act|behave|respond|reply|answer|operate|function|roleplay|role~play|pretend"
    rf"|simulate|impersonate)(?:~(?:as|like|to~be))?(?:~if~you~(?:are|were))?"
    rf"(?:~(?:a|an|the|my))?~{_ROLE_ADJ}",
    rf"pretend(?:~that)?~you~(?:are|re|were)(?:~now)?(?:~(?:a|an|the))?~{_ROLE_ADJ}",
    r"from~now~on~you~(?:will|must|shall|are~to)~(?:(?:only|always)~)?(?:respond|answer|reply"
    r"|obey|comply|follow|act|behave|ignore|pretend)",
    r"(?:enter|enable|activate|switch~to|turn~on|unlock|engage)(?:~the)?~(?:dan|jailbreak"
    r"|jailbroken|unrestricted|unfiltered|uncensored|evil)~mode",
    r"(?:dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored)~mode~(?:enabled|activated"
    r"|on|unlocked|engaged)",
    r"do~anything~now",
    # the system prompt and requests to reveal it
    r"sys(?:tem)?(?:[ ]*+)prompts?",
    r"(?:reveal|print|output|repeat|show|display|leak|dump|disclose|expose|tell~me|give~me"
    r"|share|write~out|recite|spell~out|paste)(?:~(?:me|us))?~(?:your|the~(?:initial|original"
    r"|hidden|secret|system|internal|developer|confidential))(?:~(?:initial|original|hidden"
    r"|secret|full|entire|exact|complete|system|internal|developer|confidential|current"
    r"|above)){0,3}~(?:prompts?|instructions|configuration|guidelines|directives|rules"
    r"|instruction~set)",
    # injected instruction headers
    r"(?:new|updated|revised|real|actual|true|override|overriding|secret|hidden|admin"
    r"|administrator|system|developer)(?:~(?:new|updated|system|admin))?~(?:instructions?"
    r"|directives?|orders|prompt|rules|commands?)(?:[ ]*+):",
    r"(?:here~(?:are|is)~)?your~(?:new|real|actual|true|updated)~(?:instructions?|directives?"
    r"|orders|prompt|programming)",
    rf"(?:note|message|instructions?|attention|notice|important|hey|hi|hello|dear|psst|ps)"
    rf"(?:~(?:to|for))?(?:~all)?(?:~the)?~{_AI}(?:[ ]*+):",
    r"(?:do~not|don~t|never|without)~(?:tell|telling|inform|informing|alert|alerting|notify"
    r"|notifying|mention|mentioning)(?:~(?:this|it|anything))?(?:~to)?~the~user",
    # French / Spanish / Italian (qualifier after the noun) and German
    r"(?:ignore[zr]?|oublie[zr]?|ignora|ignorar|ignorate|ignori|olvida|olvide)"
    r"(?:~(?:toutes|tous|todas|todos|tutte|tutti|les|las|los|le|i|gli|vos|tes|sus|tus)){0,3}"
    r"~(?:instructions|consignes|regles|instrucciones|reglas|istruzioni|regole|indicaciones)"
    r"~(?:precedentes|anterieures|anteriores|precedenti|previas|previos)",
    r"(?:ignoriere|ignorieren|ignorier|vergiss|vergessen|vergesst)(?:~(?:sie|alle|die|deine"
    r"|ihre|alles)){0,3}~(?:vorherigen|bisherigen|vorigen|fruheren|obigen|vorangegangenen)"
    r"~(?:anweisungen|instruktionen|regeln|befehle|anordnungen)",
)
# Alpaca-style section headers ("### Instruction:"); '#' is kept in the shadow.
_TEMPLATE_HEADER = (
    r"(?<!#)#{2,}(?:[ ]*+)(?:instruction|system|response|input|human|assistant|user)(?:[ ]*+):"
)

# Literals one of which every match of the template at the same index contains (in the folded,
# lower-cased shadow the templates match). A template is compiled only once one of its literals
# occurs in the text: compiling all of them costs ~18 ms, more than the rest of a search's own
# work, and ordinary results need a few at most. tests/test_sanitize.py checks every gate.
_VERB_GATE = (
    "ignor", "disregard", "forget", "overrid", "bypass", "discard", "abandon", "aside",
    "follow", "mind",
)  # fmt: skip
# A word the templates put after `~` (one or more spaces) is gated with its leading space: " ai"
# does not fire on "said" or "default", nor " now" on "know".
_ROLE_GATE = (
    " unrestricted", " unfiltered", " uncensored", " jailbroken", " evil", " rogue", " malicious",
    " amoral", " unethical", " unaligned", " unbound", " unlimited", " liberated", " dan",
    " hacker", " ai", " assistant", " model",
)  # fmt: skip
_AI_GATE = (
    " ai", " llm", " language", " large", " chatbot", " bot", " gpt", " chatgpt", " claude",
    " gemini", " copilot", " crawler", " scraper",
)  # fmt: skip
_VERB_GATES = (_VERB_GATE, _VERB_GATE, ("ignor", "disregard", "forget"), ("disregard",))
_PHRASE_GATES = (
    (" now",),
    (" longer",),
    _ROLE_GATE,
    _ROLE_GATE,
    (" now",),
    (" mode",),
    (" mode",),
    (" now",),
    ("prompt",),
    ("prompt", "instruction", "configuration", "guideline", "directive", "rule"),
    ("instruction", "directive", "orders", "prompt", "rules", "command"),
    ("instruction", "directive", "orders", "prompt", "programming"),
    _AI_GATE,
    (" user",),
    ("instruc", "consignes", "regle", "regla", "istruzioni", "regole", "indicaciones"),
    ("anweisungen", "instruktionen", "regeln", "befehle", "anordnungen"),
)
# A second gate where the first fires on ordinary text (" now", " mode", ":"): every match of the
# phrase template at the same index also holds one of these (empty: no second gate). A rule is
# compiled only when both hold; tests/test_sanitize.py checks these too.
_PHRASE_ALSO = (
    ("you",),
    (" no ",),  # "you are no longer ...": " longer" and "you" are both everyday words
    ("act", "behave", "respond", "reply", "answer", "operate", "function", "role", "pretend",
     "simulate", "impersonate"),
    ("pretend",),
    ("from",),
    ("enter", "enable", "activate", "switch", "turn", "unlock", "engage"),
    ("enabled", "activated", " on", "unlocked", "engaged"),
    ("anything",),
    (),
    ("reveal", "print", "output", "repeat", "show", "display", "leak", "dump", "disclose",
     "expose", "tell", "give", "share", "write", "recite", "spell", "paste"),
    (":",),
    ("your",),
    (":",),
    ("tell", "inform", "alert", "notify", "mention"),
    (),
    (),
)  # fmt: skip
assert len(_VERB_GATES) == len(_VERB_TEMPLATES) and len(_PHRASE_GATES) == len(_PHRASE_TEMPLATES)
assert len(_PHRASE_ALSO) == len(_PHRASE_TEMPLATES)

# (gate literals, pattern). Matched case-sensitively on the lower-cased shadow (twice as fast as
# IGNORECASE). Phrases led by an override verb need no left word edge: no English word ends in
# "ignore" or "disregard", and a glued prefix ("xxignore ...") must not hide them. The others
# start at an ASCII word edge (so "请ignore" is still caught). Matches of different rules may
# overlap; `_replace` merges them.
_PHRASE_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    *((gate, _words(t)) for gate, t in zip(_VERB_GATES, _VERB_TEMPLATES, strict=True)),
    *(
        (gate, r"(?<![a-z0-9])" + _words(t))
        for gate, t in zip(_PHRASE_GATES, _PHRASE_TEMPLATES, strict=True)
    ),
    (("##",), _TEMPLATE_HEADER),
)
# The second gate of each rule of _PHRASE_RULES, by index (the verb rules and the header: none).
_PHRASE_RULES_ALSO: tuple[tuple[str, ...], ...] = (
    *(() for _ in _VERB_TEMPLATES),
    *_PHRASE_ALSO,
    (),
)


@cache
def _phrase_pattern(index: int) -> re.Pattern[str]:
    return re.compile(_PHRASE_RULES[index][1])


def _phrase_matches(words: str) -> Iterable[re.Match[str]]:
    """Every injection-phrase match in `words`, rule by rule; rules whose gate literals are
    absent cannot match and are never compiled."""
    for index, (gate, _pattern) in enumerate(_PHRASE_RULES):
        also = _PHRASE_RULES_ALSO[index]
        if any(literal in words for literal in gate) and (
            not also or any(literal in words for literal in also)
        ):
            yield from _phrase_pattern(index).finditer(words)


_ROLE_TAGS = (
    r"system|system_prompt|user|assistant|human|developer|admin|instructions|im_start|im_end"
    r"|tool_calls?|tool_use|tool_results?|tool_response|tool_output|function_calls?"
    r"|function_results?|function_response|functions|search_results?|start_of_turn|end_of_turn"
)
# Every token starts with `<` or `[` (an image's `!` comes before a `[`): text holding neither
# skips the pattern, which is compiled on first use (~1.3 ms; most snippets never need it).
_TOKENS = (
    "|".join(
        (
            r"<\|[a-z0-9_.:\-]{1,40}\|>",  # <|im_start|>, <|endoftext|>, <|eot_id|> ...
            r"\[/?inst\]",  # Llama 2
            r"<</?sys>>",
            r"\[/?(?:system|sys|assistant|user|admin|developer)\]",
            # <system>, </tool_result>, <tool_call name="x"> ...
            rf"<\s*+/?\s*+(?:{_ROLE_TAGS})(?:\s[^<>]*+)?\s*+/?>",
            r"</?antml:[a-z_]{1,30}[^<>]{0,200}+>",
            # images: markdown inline / reference, HTML
            r"!\[(?:[^\[\]]|\[[^\[\]]{0,200}+\]){0,500}+\]\s*+(?:\((?:[^()]|\([^()]{0,200}+\))"
            r"{0,2000}+\)|\[[^\[\]]{0,200}+\])",
            r"<img\b[^<>]{0,2000}+>",
            r"!(?=\[)",  # an image whose brackets did not parse: without "!" it cannot load
        )
    )
)
_TOKEN_GATES = ("<", "[")


@cache
def _tokens() -> re.Pattern[str]:
    return re.compile(_TOKENS, re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Step 4: whitespace and markers.

# Patterns compiled by `re` on first use: each runs only behind its gate (most texts need none).
_SPACES = r" {2,}"
_AROUND_NEWLINE = r" *\n *"
_BLANK_LINES = r"\n{3,}"
_MARKERS = re.escape(MARKER) + r"(?:\s*" + re.escape(MARKER) + ")+"


def sanitize_text(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with invisible characters, template tokens, image links and injection phrases
    removed (see the module docstring). `keep_newlines` keeps line breaks (at most one blank
    line in a row) for multi-line answers; by default they become spaces."""
    if not isinstance(text, str):
        raise TypeError(f"sanitize_text expects str, not {type(text).__name__}")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if "\x1b" in text or "\x9b" in text:
        text = re.sub(_ANSI, "", text)
    text = _tidy(text.translate(_TABLES[keep_newlines]), keep_newlines)
    for _ in range(_MAX_PASSES):
        spans = _find(text)
        if not spans:
            return text
        text = _tidy(_replace(text, spans), keep_newlines)
    # Still matching after every pass: input nested on purpose. Nothing of it is kept.
    return text if not _find(text) else MARKER


def sanitize_results(
    results: str | Iterable[dict[str, Any]] | None, *, keep_newlines: bool = False
) -> str | list[dict[str, Any]] | None:
    """A Gemini answer (string) or a list of `{title, url, snippet}` results, sanitized.

    Every string field except `url` goes through `sanitize_text`. A result whose `url` is not an
    absolute http(s) URL (`javascript:`, `data:`, `file:`, relative, empty) is dropped whole: it
    is no search result. Kept URLs have any whitespace or control character percent-encoded so
    no invisible or bidi character reaches the reader. A result's `sitelinks` (`{title, url}`
    each) are sanitized by the same rules, and the key is dropped when none is left. Other keys
    pass through unchanged.
    """
    if results is None:
        return None
    if isinstance(results, str):
        return sanitize_text(results, keep_newlines=keep_newlines)
    clean: list[dict[str, Any]] = []
    for item in results:
        if not isinstance(item, dict):
            raise TypeError(f"sanitize_results expects dicts, not {type(item).__name__}")
        out: dict[str, Any] = {}
        if "url" in item:
            url = safe_url(item["url"])
            if url is None:
                continue
            out["url"] = url
        for key, value in item.items():
            if key == "url":
                continue
            if key == "sitelinks" and isinstance(value, list):
                value = sanitize_results(value)
                if value:
                    out[key] = value
                continue
            out[key] = (
                sanitize_text(value, keep_newlines=keep_newlines)
                if isinstance(value, str)
                else value
            )
        clean.append({key: out[key] for key in item if key in out})  # keep the key order
    return clean


# Compiled on first use (~0.4 ms): a URL of printable ASCII other than space holds none of these.
_URL_UNSAFE = (
    r"[\x00-\x20\x7f-\xa0\u00ad\u061c\u115f\u1160\u1680\u180e"
    r"\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufeff\uffa0"
    r"\ud800-\udfff\U000e0000-\U000e01ef]"
)


def safe_url(url: object) -> str | None:
    """`url` if it is an absolute http(s) URL with a host (unsafe characters percent-encoded),
    else None."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    if not (url.isascii() and url.isprintable() and " " not in url):
        url = re.sub(_URL_UNSAFE, _percent_encode, url)
    return url if is_web_url(url) else None


def _percent_encode(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "surrogatepass"))


def _tidy(text: str, keep_newlines: bool) -> str:
    if "  " in text:
        text = re.sub(_SPACES, " ", text)
    if keep_newlines and "\n" in text:
        text = re.sub(_BLANK_LINES, "\n\n", re.sub(_AROUND_NEWLINE, "\n", text))
    if MARKER in text:
        text = re.sub(_MARKERS, MARKER, text)
    return text.strip()


def _find(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is_phrase) spans to remove, in `text` coordinates."""
    shadow, offsets = _shadow(text)
    spans = []
    if any(gate in shadow for gate in _TOKEN_GATES):
        spans = [(m.start(), m.end(), False) for m in _tokens().finditer(shadow)]
    # U+0130 is the one character whose lower case is longer; folding never yields it anyway.
    words = shadow.translate(_PHRASE_PUNCT).replace("\u0130", "I").lower()
    spans += [(m.start(), m.end(), True) for m in _phrase_matches(words)]
    if offsets is None:
        return [span for span in spans if span[1] > span[0]]
    mapped = []
    for start, end, is_phrase in spans:
        if end > start:
            mapped.append((offsets[start], offsets[end - 1] + 1, is_phrase))
    return mapped


def _replace(text: str, spans: list[tuple[int, int, bool]]) -> str:
    """Overlapping spans merge; a merged span holding a phrase becomes the marker, any other a
    space (so the text on either side cannot fuse into a new token)."""
    spans.sort()
    pieces: list[str] = []
    position = 0
    index = 0
    while index < len(spans):
        start, end, phrase = spans[index]
        index += 1
        while index < len(spans) and spans[index][0] < end:
            end = max(end, spans[index][1])
            phrase = phrase or spans[index][2]
            index += 1
        pieces.append(text[position:start])
        pieces.append(MARKER if phrase else " ")
        position = end
    pieces.append(text[position:])
    return "".join(pieces)

/* tc_int.h — the guts of the tool-call layer, shared by the engine
 * (tc_stream.c), the reasoning syntaxes (../reasoning.c), output detection
 * (tc_detect.c), the shared body readers
 * (tc_json.c, tc_call_json.c, tc_call_xml.c, tc_call_py.c) and the format
 * files (tc_<name>.c). Nothing outside src/chat includes it.
 *
 * The model: the unconsumed input sits in r->in from r->pos. A step handler
 * looks at it and either consumes a prefix (emitting events) or reports that
 * it cannot decide yet (TC_MORE). Handlers decide only from bytes they have
 * seen, never from where a chunk ended, so every split of the same text gives
 * the same events (chunk parity). Each byte is examined a bounded number of
 * times (r->work counts them), which keeps parsing linear.
 *
 * A tool-call section starts speculative: its events are captured, and the
 * raw text is kept, until the section's reader is sure it is a call
 * (tc_commit), e.g. once `{"name": "x"` has been read after <tool_call>. If it
 * turns out to be prose (TC_FAIL), the capture is dropped and the raw text is
 * released as ordinary text. Bare syntaxes (a JSON object or a Python list in
 * the middle of prose) commit only when a whole valid call has been read. */
#ifndef CV_TC_INT_H
#define CV_TC_INT_H

#include "chat/chat.h"
#include "grammar/grammar.h" /* cv_tool_syntax: how each row writes a forced call */

/* ---- step results ---- */

enum {
    TC_MORE = 0, /* nothing more can be decided without more input */
    TC_OK,       /* progress was made; call again */
    TC_DONE,     /* the construct is complete */
    TC_FAIL,     /* the input is not this construct (at r->pos) */
    TC_SWITCH,   /* a section reader: the text from the section's start is this
                  * row's own stream (tc_detect.c hands it over) */
};

/* ---- tolerant streaming JSON transcoder (tc_json.c) ---- */

enum {
    TJ_GEMMA = 1 << 0,     /* Gemma 4: strings delimited by <|"|>, bare keys */
    TJ_DECODE = 1 << 1,    /* top-level string: write its decoded bytes, not JSON */
    TJ_SKIP = 1 << 2,      /* write nothing (find the end of a value) */
    TJ_NO_BARE = 1 << 3,   /* bare words are errors (speculative bare JSON) */
    TJ_OBJECT = 1 << 4,    /* the value must be an object (a call's arguments) */
};

/* A value's expected JSON-schema type, reduced to what coercion needs. */
typedef struct tc_type {
    unsigned mask; /* TT_* bits; 0 = unknown: keep what the model wrote */
} tc_type;
enum { TT_STRING = 1, TT_INTEGER = 2, TT_NUMBER = 4, TT_BOOLEAN = 8, TT_NULL = 16, TT_OBJECT = 32, TT_ARRAY = 64 };

typedef struct tc_json {
    unsigned flags;
    int st;                 /* parser state */
    int depth;
    uint8_t stack[CV_MAX_JSON_DEPTH + 1]; /* '{' or '[' per open container */
    bool first;             /* no element yet in the innermost container */
    bool in_key;
    int quote;              /* '"', '\'' or 'G' (<|"|>) while in a string */
    char esc[16];           /* a pending escape sequence */
    int n_esc;
    char u8[4];             /* a pending UTF-8 sequence inside a string */
    int n_u8, need_u8;
    uint32_t hi_surrogate;
    cv_buf tok;             /* a bare token (number, literal, bare key) */
    /* coercion by schema: top (depth-0 value) and props (keys of depth 1) */
    tc_type top;
    const json_t *props;
    tc_type cur;            /* type of the depth-1 value being read */
    bool holding;           /* the current value goes to `held` for coercion */
    int hold_depth;
    int hold_kind;          /* 's' string, 'c' container, 't' token */
    cv_buf held;
    cv_buf key;             /* depth-1 key being read */
    cv_buf *out;            /* where canonical JSON goes (NULL with TJ_SKIP) */
    size_t out_cap;         /* 0, or the most bytes out may grow to ... */
    bool overflow;          /* ... and whether the value wanted more */
    uint64_t *work;
} tc_json;

/* Prepares a transcoder writing to out (may be NULL for TJ_SKIP). top types
 * the whole value, props (a schema "properties" object) types the members of
 * a top-level object. Call tc_json_fini to free. */
void tc_json_init(tc_json *j, unsigned flags, tc_type top, const json_t *props, cv_buf *out, uint64_t *work);
void tc_json_fini(tc_json *j);
/* Reads from p[0..n): returns TC_DONE with *used = bytes of the value (the
 * rest is not this value's), TC_MORE with *used = n when the value goes on,
 * or TC_FAIL with *used = offset of the offending byte. With eof, an
 * unterminated value is closed (strings, brackets) and TC_DONE returned,
 * unless nothing of a value was read. */
int tc_json_feed(tc_json *j, const char *p, size_t n, bool eof, size_t *used);
/* Whether any byte of the value has been read (not just whitespace). */
bool tc_json_started(const tc_json *j);
/* Writes the canonical JSON of a number-like token (+1, .5, 1_000, 1e3) to
 * b; false if it is not a finite number. */
bool tc_number_canon(const char *s, size_t n, cv_buf *b);
/* Appends p as the inside of a JSON string (no quotes); p must be complete
 * UTF-8 (invalid bytes become U+FFFD). */
void tc_esc(cv_buf *b, const char *p, size_t n);
/* One-shot: transcodes text into canonical JSON in out; returns 0, or -1
 * (out unchanged) when it is not a complete value or has trailing garbage. */
int tc_json_canon(const char *p, size_t n, unsigned flags, tc_type top, const json_t *props, cv_buf *out);

/* ---- schema typing (tc_schema.c) ---- */

/* The tool object ({"type":"function","function":{...}}) named name, or NULL. */
const json_t *tc_tool_find(const json_t *tools, const char *name, size_t len);
/* The "properties" object of a tool's parameters schema, or NULL. */
const json_t *tc_tool_props(const json_t *tool);
/* Whether arguments (a JSON object's text) fit a tool's parameters schema
 * well enough to take bare text as a call to it: see tc_schema.c. */
bool tc_args_fit(const json_t *tool, const char *args, size_t len);
/* The type of property key in props (absent or untyped: mask 0). */
tc_type tc_prop_type(const json_t *props, const char *key, size_t len);
/* The schema of property key, or NULL. */
const json_t *tc_prop_schema(const json_t *props, const char *key, size_t len);
/* Converts raw text (an XML parameter value, a quoted string the schema says
 * is not a string) to JSON of type t, appending to out. string_ok: when no
 * other type fits, write it as a JSON string (else returns -1). Unknown type
 * (mask 0): as_json decides between parsing it as JSON and keeping a string. */
int tc_coerce_text(const char *p, size_t n, tc_type t, bool as_json, cv_buf *out);

/* ---- marker sets and the common scanner (tc_scan.c) ---- */

enum {
    MK_ROPEN = 1,  /* reasoning opener (arg = pair) */
    MK_RCLOSE,     /* reasoning closer (arg = pair) */
    MK_START,      /* a tool-call section of this format (start = which; weak ones are bare syntax) */
    MK_DROP,       /* stray markup removed from the text */
    MK_FALLBACK,   /* another format's section (cross-format fallback) */
    MK_FENCE,      /* ``` around a JSON response */
};

struct tc_start;

typedef struct tc_mark {
    const char *s;
    uint16_t len;
    uint8_t kind;
    uint8_t arg;
    const struct tc_start *start;
    const cv_tc_format *fmt;
} tc_mark;

#define TC_PAIR_BUCKETS 512
typedef struct tc_markset {
    tc_mark *m;        /* sorted by first byte (once built) */
    int n, cap;
    int first[256];    /* index of the first marker starting with that byte, -1 */
    int count[256];
    int16_t pair[TC_PAIR_BUCKETS]; /* markers by their first two bytes: chain heads, -1 */
    int16_t *next;     /* chain links, per marker */
    int16_t single[256]; /* the one-byte marker for that byte, -1 */
    size_t maxlen;
} tc_markset;

void tc_markset_add(tc_markset *s, const char *text, int kind, int arg, const struct tc_start *st,
                    const cv_tc_format *fmt);
void tc_markset_build(tc_markset *s);

enum { SCAN_NONE, SCAN_HIT, SCAN_PARTIAL };
/* Finds the first marker in p[0..n). SCAN_HIT: a marker starts at *at (the
 * longest one there, unless a longer one may still follow: then PARTIAL).
 * SCAN_PARTIAL: no marker before *at, and p[*at..n) may be the start of one
 * (hold it). SCAN_NONE: no marker and nothing to hold (*at = n). With eof,
 * partial markers are not held. */
int tc_scan(const tc_markset *s, const char *p, size_t n, bool eof, size_t *at, const tc_mark **hit,
            uint64_t *work);

/* ---- formats ---- */

typedef struct cv_chat_parse tc_run;
typedef struct tc_sec tc_sec;

/* A reasoning block's markers. */
typedef struct tc_reason {
    const char *open;
    const char *close;
} tc_reason;

/* One way a tool-call section starts in the text, and the reader for it. */
typedef struct tc_start {
    const char *marker;
    int (*read)(tc_run *r, tc_sec *s); /* a section reader (below) */
    const void *cfg;                   /* its configuration */
    bool weak;                         /* bare syntax: commit only whole calls */
    bool at_start;                     /* only before any other text */
    bool keep;                         /* the marker is the syntax's first bytes: the reader reads it */
} tc_start;

/* Returns TC_SWITCH at once: a marker that only the row's own stream
 * reader understands (Harmony's <|channel|>), for cv_tc_format.detect. */
int tc_read_switch(tc_run *r, tc_sec *s);

enum {
    TC_F_DRAIN = 1 << 0,       /* text after a completed tool-call section is dropped */
    TC_F_ID9 = 1 << 1,         /* generated ids are 9 letters/digits (Mistral) */
    TC_F_OPENER_TEXT = 1 << 2, /* the prompt's reasoning opener is reasoning text (Apriel) */
    TC_F_NO_FALLBACK = 1 << 3, /* never used as a cross-format fallback */
};

struct cv_tc_format {
    const char *name;
    /* How a call is written in this syntax, for forced-call grammars; NULL
     * for a row without call syntax (plain_content). */
    const cv_tool_syntax *syntax;
    const char *summary;
    const char *const *aliases;
    /* selection: every string of one row of tmpl must occur in the template */
    const char *const *tmpl[4];
    int tmpl_rank;                 /* higher wins when several rows match */
    const char *const *names;      /* model-name / architecture substrings (lowercase) */
    const tc_reason *reason;       /* NULL-terminated by open == NULL; NULL = <think> */
    const tc_start *starts;        /* terminated by marker == NULL */
    /* Output detection (opts.detect, tc_detect.c) watches every row's strong
     * starts; these are what else tells the row's syntax apart in output it
     * was not chosen for: bare shapes (weak: a call only when whole, to a
     * declared tool, with arguments that fit its schema) and the markers of
     * rows that read the whole stream (their reader returns TC_SWITCH).
     * Terminated by marker == NULL; may be NULL. */
    const tc_start *detect;
    const char *const *drops;      /* stray markup to remove, NULL-terminated */
    /* Formats that read the whole stream themselves (Harmony channels,
     * Functionary's >>> recipients) instead of content + sections. */
    int (*stream)(tc_run *r);
    /* Such a row's own markers, when it scans for others than the content
     * ones (Harmony's tokens, Functionary's >>>): they fill the content and
     * reasoning sets in their place, when the parser is created for the row
     * or hands the stream over to it (tc_stream.c), with the bare shapes of
     * tc_detect_shapes beside them. NULL: the usual sets. */
    void (*stream_marks)(const cv_tc_format *f, tc_markset *content, tc_markset *reasoning);
    unsigned flags;
    /* The reasoning_effort values the family's chat template takes, least
     * reasoning first, NULL-terminated; NULL: the template takes the wire's
     * word as given (or none). */
    const char *const *efforts;
};

extern const cv_tc_format *const cv_tc_formats[];
extern const int cv_tc_n_formats;

/* ---- section state: one union of the shared readers' states ---- */

typedef struct tc_jshape {
    const char *const *name_keys;  /* "name", "tool_name", ... */
    const char *const *args_keys;  /* "arguments", "parameters", ... */
    const char *const *id_keys;    /* "id", "tool_call_id"; NULL: ids never in the object */
    bool name_is_key;              /* {"NAME": {args}} (Apertus) */
    bool need_args;                /* a call must name its arguments (bare Llama 3 JSON) */
    /* only call keys (name, arguments, id, type, function): any other key
     * makes the object data, at once (a bare object found by detection is
     * then released without waiting for its end) */
    bool call_keys_only;
} tc_jshape;

/* The JSON call-object reader (tc_call_json.c). */
typedef struct tc_jcall {
    int st;
    int nest;              /* 1 inside {"function": {...}} */
    const tc_jshape *shape;
    tc_json j;             /* value reader */
    bool j_live;
    int what;              /* which member is being read */
    cv_buf name, id, key, raw, args;
    bool have_name, have_args, begun, args_raw, args_streamed;
    bool live;             /* the call was accepted */
} tc_jcall;

/* The XML parameter reader's dialect (tc_call_xml.c). */
typedef struct tc_xml {
    const char *invoke;       /* "<function=" or "<invoke name=\"" ... */
    bool name_quoted;         /* the name ends at '"' (then attributes until '>') */
    const char *invoke_end;   /* "</function>" */
    const char *param;        /* "<parameter=" or "<parameter name=\"" */
    bool param_quoted;
    const char *param_end;    /* "</parameter>" */
    bool strip_nl;            /* one leading and one trailing \n are layout */
    bool cdata;               /* <![CDATA[...]]> values (MiniCPM) */
    bool string_attr;         /* string="true|false" attribute (DSML) */
    const char *const *stops; /* tags that end a value whose close is missing */
} tc_xml;

typedef struct tc_xcall {
    int st;
    const tc_xml *x;
    cv_buf name, key, val, attrs;
    tc_type t;
    bool as_json, streaming, wrap, live, saw_nl;
    int n_params;
    tc_json j;
} tc_xcall;

/* The Python call reader (tc_call_py.c). */
typedef struct tc_pcall {
    int st;
    cv_buf name, key;
    tc_json j;
    bool live, any;
    int n_args;
} tc_pcall;

/* The envelope reader's configuration (tc_call_env.c): what may appear
 * between the section's start marker and its end marker. */
enum {
    IT_JSON = 1 << 0,  /* {"name":..,"arguments":..} */
    IT_LIST = 1 << 1,  /* [ {call}, {call} ] */
    IT_XML = 1 << 2,   /* <function=..><parameter=..>..</parameter></function> */
    IT_GLM = 1 << 3,   /* NAME <arg_key>k</arg_key><arg_value>v</arg_value> */
    IT_PY = 1 << 4,    /* f(a=1) */
    IT_PYLIST = 1 << 5, /* [f(a=1), g()] */
    IT_NAMEJSON = 1 << 6, /* NAME{..} / NAME[ARGS]{..} / NAME[CALL_ID]id[ARGS]{..} */
};

typedef struct tc_env {
    const char *end;               /* end marker, NULL: the section ends with its items */
    const char *const *alt_end;    /* other accepted end markers */
    unsigned items;
    const tc_xml *xml;             /* dialect of IT_XML items */
    const tc_xml *glm;             /* dialect of IT_GLM items */
    const tc_jshape *shape;
    const char *const *skip;       /* tokens skipped between items ("<|plugin|>", "```json") */
    const char *seps;              /* separator bytes between items (",;") */
    bool one;                      /* one item only */
    /* The row that Python items belong to, when a JSON row's bare list also
     * reads them (what output detection reports for them). */
    const cv_tc_format *py_row;
} tc_env;

struct tc_sec {
    const tc_start *start;
    const cv_tc_format *fmt;
    int st;
    int n_items;
    int n_calls;       /* calls read in this section (accepted or not) */
    int in_list;       /* inside [..]: 1 JSON calls, 2 Python calls, 3 empty */
    bool py;           /* a Python call or list was read */
    const cv_tc_format *syntax; /* the row the section's calls are written in */
    union {
        tc_jcall jc;
        tc_xcall xc;
        tc_pcall pc;
    } u;
    int item;          /* which IT_* is being read */
    size_t scan;       /* a resumable scan's position (bytes already examined) */
    int depth;
    cv_buf tmp, tmp2;  /* format-specific scratch */
    tc_json j;         /* format-specific value reader */
    bool j_live;
    int aux;
};

/* ---- the run (cv_chat_parse) ---- */

/* Follows the JSON structure of the arguments emitted for the open call, so
 * that whatever a reader does, TOOL_END comes after arguments that parse:
 * tc_call_end closes an open string, a missing value, open brackets, or
 * writes "{}" for a call that got none. */
typedef struct tc_argtrack {
    uint8_t stack[CV_MAX_JSON_DEPTH + 2];
    int depth;
    int exp;
    bool in_str, esc, str_is_key, in_scalar, any, last_comma;
} tc_argtrack;

enum { RM_CONTENT, RM_REASON, RM_SECTION, RM_STREAM, RM_HELD };
enum { K_CONTENT, K_REASONING };

/* The run's state has one writer, tc_stream.c, part by part as its banners
 * go (input, events, calls, speculation, sections, reasoning, content,
 * lifecycle); the other files read it and change it only through its
 * functions (tc_eat / tc_uneat, tc_text, tc_call_*, tc_commit).
 * reasoning.c and tc_detect.c decide and never write a run: they fill the
 * marker sets they are handed. What a reader owns while it runs is the
 * exception, each written by the one reader in use: sec (the section
 * reader, through its tc_sec *), os_* (the whole-stream row; tc_stream.c
 * resets it at a hand-over), scratch (any reader's, within one step), and
 * work (the count of bytes examined that every reader adds to, for the
 * linear bound). */
struct cv_chat_parse {
    const cv_tc_format *fmt;
    cv_chat_parse_opts o;
    cv_chat_event_fn fn;
    void *ud;
    /* input */
    cv_buf in;
    size_t pos;
    bool eof, finished;
    uint64_t work;
    /* where we are */
    int mode;
    int rpair;                 /* the reasoning pair in use */
    bool any_text;             /* some content/reasoning text was seen */
    bool drained;              /* TC_F_DRAIN: content after calls is dropped */
    bool fenced;               /* json_response: inside ```json */
    const tc_markset *cmarks;  /* what can start in content (shared, tc_stream.c) */
    const tc_markset *rmarks;  /* what can end or interrupt reasoning */
    /* section */
    tc_sec sec;
    int sec_return;            /* mode to return to after the section */
    /* speculation */
    bool spec;
    bool spec_weak;
    bool spec_hold;            /* reasoning-held: commit only at the end */
    size_t spec_start;         /* offset in in where the raw text starts */
    int spec_kind;             /* how to release it: K_CONTENT / K_REASONING */
    int spec_mode;             /* mode to resume after an abort */
    cv_buf cap;                /* captured events */
    int spec_n_calls;
    cv_rng spec_rng;           /* the id generator where speculation began: an abort rewinds it */
    bool spec_ws_seg;
    /* output detection (tc_detect.c) */
    const cv_tc_format *spec_prev; /* the format before a speculative switch */
    const cv_tc_format *spec_syntax; /* the row the speculative section is written in */
    bool spec_fit;             /* weak detection: calls must fit their tools' schemas */
    bool spec_at_start;        /* the section began before any text */
    const cv_tc_format *detected; /* the row whose calls were committed last, or NULL */
    /* whitespace at the end of the text so far: emitted when more text of
     * the same kind follows, dropped when the other kind or the end does */
    cv_buf ws;
    int ws_kind;
    bool started[2];           /* some text of this kind was emitted */
    /* calls */
    int n_calls;               /* calls emitted (live + captured) */
    bool call_open;            /* a live call is between BEGIN and END */
    int call_index;
    tc_argtrack at;
    const json_t *call_props;
    cv_buf scratch;
    cv_rng rng;
    /* own-stream formats (Harmony, Functionary 3.2) */
    int os_st;
    cv_buf os_hdr;
    int os_kind;
    bool os_flag;
    bool os_text;              /* Harmony: text came since the last message ended */
};

/* ---- input access ---- */

static inline const char *tc_p(const tc_run *r) { return r->in.data + r->pos; }
static inline size_t tc_n(const tc_run *r) { return r->in.len - r->pos; }
void tc_eat(tc_run *r, size_t n);
/* Gives back the last n bytes eaten in this step (still in the buffer: it
 * is compacted only between feeds). */
void tc_uneat(tc_run *r, size_t n);

/* Compares the input with a literal: TC_DONE if it starts with it (consumed
 * when eat), TC_FAIL if it cannot, TC_MORE if the input is a proper prefix
 * of it and more may come. */
int tc_lit(tc_run *r, const char *lit, bool eat);
/* Reads a word (no '<' or newline, at most CV_TC_MAX_NAME bytes) followed
 * by the literal mark: TC_DONE with the word in *word and both consumed,
 * TC_MORE if the input may still complete them, TC_FAIL otherwise (input
 * untouched). The name-then-marker step of DeepSeek's and Kimi's calls. */
int tc_word_then(tc_run *r, const char *mark, cv_buf *word);
/* Skips whitespace; TC_MORE if it reached the end of the input (not eof). */
int tc_ws(tc_run *r);
/* Reads an identifier ([A-Za-z_][A-Za-z0-9_.-]*, dots and dashes kept) into
 * out without consuming: returns its length, 0 if none, -1 if the input ends
 * inside it (need more). */
long tc_ident(tc_run *r, size_t off, bool dots);

/* ---- events ---- */

/* Content or reasoning text. Leading whitespace of the first text of each
 * kind, and trailing whitespace of the last, are dropped; inside, every
 * byte is kept (text around a call keeps its spaces). */
void tc_text(tc_run *r, int kind, const char *p, size_t n);
/* Starts a call. Returns true when it is emitted; false when it is dropped
 * (undeclared, tool_choice none, a second call without parallel calls, too
 * many): its reader still consumes it but tc_call_args/end do nothing. */
bool tc_call_begin(tc_run *r, const char *name, size_t nlen, const char *id, size_t idlen);
void tc_call_args(tc_run *r, const char *p, size_t n);
void tc_call_end(tc_run *r);
/* The tool a name refers to (after "functions." stripping), or NULL. */
const json_t *tc_resolve(const tc_run *r, const char *name, size_t nlen, size_t *name_off);

/* ---- speculation ---- */

/* The section read so far is a call: emit what was captured, go live. */
void tc_commit(tc_run *r);

/* Calls fn for every captured event, in order (the speculative section's
 * events, not yet emitted). */
void tc_cap_each(const tc_run *r, cv_chat_event_fn fn, void *ud);

/* ---- output detection (tc_detect.c: decisions; tc_stream.c acts on them) ---- */

/* Adds to the content and reasoning marker sets every other row's markers,
 * and the row in use's own shapes its starts do not write (opts.detect). */
void tc_detect_marks(const tc_run *r, tc_markset *content, tc_markset *reasoning);
/* Format f's start written as mark m's text, or NULL. */
const tc_start *tc_own_start(const cv_tc_format *f, const tc_mark *m);
/* Format f's reasoning pair whose opener (closer) is m's text, or -1. */
int tc_own_pair(const cv_tc_format *f, const tc_mark *m, bool closer);
/* What a mark registered for another row than r->fmt means now: false when
 * it is text; else *st, *f (the row it switches to, or r->fmt) and *pair
 * are set. */
bool tc_detect_resolve(const tc_run *r, const tc_mark *m, const tc_start **st, const cv_tc_format **f, int *pair);
/* Whether the weak section's captured calls fit their tools' schemas (and a
 * Python list is the reply's start). */
bool tc_detect_fits(const tc_run *r);
/* Adds every row's bare shapes (the weak detect starts: JSON call objects,
 * lists of them, fences) to set, where a call may come of them (opts.detect,
 * tools possible, no JSON response): what a row that reads the whole stream
 * looks for in its own content text (tc_stream_shape). */
void tc_detect_shapes(const tc_run *r, tc_markset *set);

/* ---- reasoning syntaxes (../reasoning.c; the reasoning mode is tc_stream.c's) ---- */

const tc_reason *tc_reasons(const cv_tc_format *f);
/* Adds format f's reasoning openers (and closers, which a reply may start
 * with) to the content set and its closers to the reasoning set. */
void tc_reason_marks(const cv_tc_format *f, tc_markset *content, tc_markset *reasoning);

/* ---- sections ---- */

/* Runs the section reader once; handles done/fail. */
int tc_section_step(tc_run *r);

/* Shared readers: each is a tc_start.read. */
int tc_read_env(tc_run *r, tc_sec *s);     /* cfg: tc_env */

/* Item readers used by envelopes and formats. Each starts at the item's
 * first byte; returns TC_MORE / TC_OK / TC_DONE / TC_FAIL. */
void tc_jcall_init(tc_jcall *c, const tc_jshape *shape);
void tc_jcall_fini(tc_jcall *c);
int tc_jcall_step(tc_run *r, tc_jcall *c);
void tc_xcall_init(tc_xcall *c, const tc_xml *x);
void tc_xcall_fini(tc_xcall *c);
int tc_xcall_step(tc_run *r, tc_xcall *c);
void tc_pcall_init(tc_pcall *c);
void tc_pcall_fini(tc_pcall *c);
int tc_pcall_step(tc_run *r, tc_pcall *c);

/* The default JSON call shape: name / arguments|parameters. */
extern const tc_jshape tc_shape_default;
/* Dialects and readers shared between format files. */
extern const tc_xml tc_xml_qwen;  /* tc_qwen3_coder_xml.c */
extern const tc_xml tc_xml_glm;   /* tc_glm45.c */
int tc_read_deepseek(tc_run *r, tc_sec *s); /* tc_deepseek_v3.c */
/* ```json and ``` around a call's JSON: skipped inside envelopes. */
extern const char *const tc_skip_fences[];

/* Streams one JSON value (the arguments of a call already begun) from the
 * input through a transcoder into TOOL_ARGS. j must be initialised;
 * returns TC_MORE / TC_DONE / TC_FAIL. On TC_FAIL the arguments emitted so
 * far are closed into valid JSON, so a call that was already streaming always
 * ends with parseable arguments (a value that never started is the caller's
 * to replace, e.g. with "{}"). */
int tc_stream_args(tc_run *r, tc_json *j, cv_buf *out);

/* A row that reads the whole stream met m, one of tc_detect_shapes' marks,
 * in text it emits as content (Harmony's final channel, Functionary's "all"):
 * starts m's section as content_step starts one in the other rows' content
 * (speculative: a call only once whole, declared and fitting its schema),
 * and the row's stream resumes where the section ends (its text released as
 * content when it was none). False when the shape does not apply here (a
 * call found already, tool_choice none): the row then takes m's first byte
 * as text. */
bool tc_stream_shape(tc_run *r, const tc_mark *m);

/* Skips the section's stray bytes: true when p starts with one of toks. */
int tc_skip_tokens(tc_run *r, const char *const *toks);

#endif

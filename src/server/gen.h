/* gen.h — the one generation pipeline (gen.c) and the encoder interface
 * each generating wire plugs into it, private to src/server/. */
#ifndef CV_SERVER_GEN_H
#define CV_SERVER_GEN_H

#include "server/server_int.h"

typedef struct cv_gen cv_gen;

/* One wire's encoder: its state for one parsed request comes from create
 * (given whether the request streams), or from create_for when the encoder
 * reads more of the request (Responses: the store flag in body and the
 * conversation to store; its failures are the request's 4xx). Then gen.c
 * calls the rest in order — begin once, event per parser event, logprobs
 * per generated token when asked, then finish or error once; keepalive
 * whenever nothing was sent for the keep-alive interval. Each appends its
 * bytes (SSE frames, or for non-streaming the whole JSON at finish) to out. */
struct cv_gen_enc {
    const char *id_prefix; /* of the response ids: "chatcmpl-", "msg_", ... */
    void *(*create)(bool stream);
    int (*create_for)(const cv_http_req *req, json_t *body, const cv_chat_request *r, void **ud, cv_err *err);
    void (*begin)(void *ud, cv_gen *g, cv_buf *out);
    void (*event)(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out);
    void (*finish)(void *ud, cv_gen *g, cv_buf *out);
    void (*error)(void *ud, cv_gen *g, const cv_err *e, cv_buf *out);
    void (*keepalive)(void *ud, cv_gen *g, cv_buf *out);
    void (*destroy)(void *ud);
};

/* Why generation ended, as the wires distinguish it. */
typedef enum cv_gen_finish {
    CV_GEN_RUNNING,
    CV_GEN_STOP,      /* end of generation token */
    CV_GEN_STOP_SEQ,  /* a stop string (cv_gen_stop_seq says which) */
    CV_GEN_LENGTH,    /* max_tokens or the context */
    CV_GEN_TOOL,      /* stopped after tool calls */
    CV_GEN_CANCELED,
    CV_GEN_ERROR,
} cv_gen_finish;

/* Renders and tokenizes req with be (the model slot holds, released with
 * the gen), checks the context, submits. Takes ownership of req (a heap
 * cv_chat_request, freed with the gen), of enc_ud (freed through
 * enc->destroy) and of the hold on slot even on failure. CV_EINVAL when the prompt leaves no
 * room in the context (the message says both numbers); CV_EBUSY when the
 * queue is full. max_tokens above the room left is clamped, not rejected:
 * agents send 32000-64000 whatever the context (CLIENTS.md). */
int cv_gen_start(cv_server *srv, cv_model_slot *slot, const cv_server_backend *be, cv_chat_request *req,
                 const cv_gen_enc *enc, void *enc_ud, cv_gen **out, cv_err *err);
/* Moves the generation on: waits up to wait_ms for scheduler events,
 * handles what arrived and appends encoded bytes to out. Returns 1 once
 * finished (finish or error frames written), else 0. */
int cv_gen_pump(cv_gen *g, int wait_ms, cv_buf *out);
/* Asks the scheduler to stop; the next pump finishes with CV_GEN_CANCELED. */
void cv_gen_cancel(cv_gen *g, bool client_gone);
void cv_gen_destroy(cv_gen *g);

/* A streaming body over a started generation (takes ownership of g). */
cv_stream *cv_gen_stream(cv_gen *g);
/* Runs a non-streaming generation to its end in the calling thread,
 * polling fd for a hang-up; appends the encoder's output to out. Returns 0,
 * or CV_ECANCELED when the client left. Takes ownership of g. */
int cv_gen_run(cv_gen *g, int fd, cv_buf *out);

const cv_chat_request *cv_gen_request(const cv_gen *g);
cv_server *cv_gen_server(const cv_gen *g);
/* The model's backend the gen runs on. */
const cv_server_backend *cv_gen_backend(const cv_gen *g);
/* The model name a response carries: the one the client asked for, else the served one. */
const char *cv_gen_model(const cv_gen *g);
const char *cv_gen_id(const cv_gen *g);        /* the response id the wire made */
void cv_gen_set_id(cv_gen *g, const char *id);
int64_t cv_gen_created(const cv_gen *g);
int32_t cv_gen_n_prompt(const cv_gen *g);
int32_t cv_gen_n_cached(const cv_gen *g);
int32_t cv_gen_n_generated(const cv_gen *g);
int32_t cv_gen_n_reasoning(const cv_gen *g);
int cv_gen_n_tool_calls(const cv_gen *g);
cv_gen_finish cv_gen_finish_reason(const cv_gen *g);
const char *cv_gen_stop_seq(const cv_gen *g);  /* the stop string hit, or NULL */
/* Log probabilities of tokens generated since the last call, as OpenAI
 * chat entries [{token, logprob, bytes, top_logprobs:[...]}] (new
 * reference, or NULL when none or not asked). */
json_t *cv_gen_take_logprobs(cv_gen *g);

#endif

/* sched_step.c — the engine thread: continuous batching. Each step
 *   1. ends running requests whose caller cancelled them, and waiting ones;
 *   2. admits waiting requests, oldest first, while a sequence slot is free
 *      and the KV pool (free blocks plus blocks the prefix tree could evict)
 *      holds the rest of the prompt plus one block of growth per running
 *      sequence; admission looks the prompt up in the prefix tree, asks the
 *      engine how deep the matched path can be resumed (anywhere for plain
 *      KV; at a snapshot for a recurrent state) and restores the sequence
 *      from it, so only the rest is computed;
 *   3. builds one batch under the token budget: the next token of every
 *      decoding sequence, then prefill chunks of the others, oldest first,
 *      so a long prompt delays running streams by one chunk at most; blocks
 *      come from the free pool, then from LRU eviction in the tree, then by
 *      preempting the newest running sequence (its blocks stay in the tree;
 *      it goes back to the front of the queue and is recomputed later);
 *   4. runs one forward call, inserts every newly filled block into the
 *      tree (so concurrent requests share a prefix as soon as it exists),
 *      snapshots a recurrent state where the policy in sched_int.h says
 *      (prefill chunks end there), and samples each sequence whose known
 *      tokens are all computed.
 *
 * A request's known tokens are its prompt and what it generated; "pending"
 * are those not yet in its KV cache. A fresh request has the whole prompt
 * pending, a decoding one has its last sampled token, and a preempted one
 * has everything its lost blocks held. The same rule serves all three:
 * feed pending tokens, ask for logits at the last one, then sample. The
 * sampler (and its RNG) lives with the request, so preemption and prefix
 * hits never change what is sampled. A partly taken draft on a model whose
 * state cannot be cut back leaves its taken tokens pending too (n_redo):
 * the engine returned to the checkpoint before the draft, and the next step
 * feeds them again with the new token, drafting on top as a decode does.
 *
 * An embedding request (sched.h, cv_pooling) is a prompt and nothing else:
 * its chunks ride in the same batches, the step keeps every row's hidden
 * state (cv_engine_keep_hidden) when one is in it, the request pools its own
 * rows as they come (pool_rows), and once its prompt is all computed it
 * sends its vector and leaves. It never touches the prefix tree, so its KV
 * blocks go back to the pool with its sequence.
 *
 * Several schedulers of one process (one per model) take their threads for
 * each step from a cv_sched_share (share.c) when they have one. */
#include <math.h>
#include <stdlib.h>

#include "sched/sched_int.h"

static inline int32_t ceil_blocks(int64_t n) { return (int32_t)((n + CV_KV_BLOCK - 1) / CV_KV_BLOCK); }

/* ---- events ---- */

static cv_sched_event base_event(const cv_sched_req *r, cv_sched_event_type type)
{
    cv_sched_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.n_prompt = r->n_prompt;
    ev.n_cached = r->st_cached;
    ev.n_generated = r->n_gen;
    return ev;
}

static void push_final(cv_sched_req *r, cv_sched_event *ev)
{
    if (r->hook && r->hook->destroy) /* before the final event: the caller may rely on it */
        r->hook->destroy(r->hook_ud);
    r->hook = NULL;
    cv_sched_push_event(r, ev);
    cv_sched_req_unref(r); /* the scheduler's reference */
}

void cv_sched_finish_waiting(cv_sched_req *r)
{
    cv_sched_event ev = base_event(r, CV_SCHED_DONE);
    ev.finish = CV_FINISH_CANCELED;
    push_final(r, &ev);
}

/* Copies what /v1/status and the statistics show; mu is held. Called at
 * the end of every step and whenever a request leaves, before its final
 * event, so a caller who saw the final event sees figures that include it. */
static void publish_locked(cv_sched *s)
{
    for (int32_t i = 0; i < s->n_running; i++) {
        cv_sched_req *r = s->running[i];
        r->st_done = r->n_done;
        r->st_gen = r->n_gen;
    }
    s->st.steps = s->eng.steps;
    s->st.n_requests = s->eng.n_requests;
    s->st.preemptions = s->eng.preemptions;
    s->st.prompt_tokens = s->eng.prompt_tokens;
    s->st.cached_tokens = s->eng.cached_tokens;
    s->st.n_tokens_prompt = s->eng.n_tokens_prompt;
    s->st.n_tokens_generated = s->eng.n_tokens_generated;
    s->st.lookups = s->eng.lookups;
    s->st.hits = s->eng.hits;
    s->st.draft_tokens = s->eng.draft_tokens;
    s->st.draft_accepted = s->eng.draft_accepted;
    s->st.draft_declined = s->eng.draft_declined;
    s->st.step_base_s = s->step_base;
    s->st.att_per_pos_s = s->att_per_pos;
    s->st.evictions = s->tree.n_evicted;
    s->st.snapshots = s->tree.n_snaps;
    s->st.snapshot_blocks = (int64_t)s->tree.n_snaps * s->mem.snapshot_blocks;
    s->st.tree_blocks = s->tree.n_nodes + s->st.snapshot_blocks;
    s->st.snapshots_taken = s->eng.snapshots_taken;
    s->st.snapshot_hits = s->eng.snapshot_hits;
    s->st.draft_recomputed = s->eng.draft_recomputed;
    s->st.kv_blocks = cv_engine_kv_n_blocks(s->e);
    s->st.kv_blocks_free = cv_engine_kv_free_blocks(s->e);
    cv_mem_info mi;
    cv_engine_mem_info(s->e, &mi);
    s->st.n_kv_groups = mi.n_groups;
    memcpy(s->st.kv_groups, mi.group, sizeof s->st.kv_groups);
}

static void publish(cv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    publish_locked(s);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the running set (admission order; readers hold mu) ---- */

static void running_add(cv_sched *s, cv_sched_req *r)
{
    pthread_mutex_lock(&s->mu);
    s->running[s->n_running++] = r;
    r->phase = PHASE_PREFILL;
    pthread_mutex_unlock(&s->mu);
}

static void running_remove(cv_sched *s, cv_sched_req *r)
{
    pthread_mutex_lock(&s->mu);
    int32_t i = 0;
    while (i < s->n_running && s->running[i] != r)
        i++;
    assert(i < s->n_running);
    memmove(s->running + i, s->running + i + 1, (size_t)(s->n_running - i - 1) * sizeof *s->running);
    s->n_running--;
    publish_locked(s);
    pthread_mutex_unlock(&s->mu);
}

/* Leaves the engine: the tree keeps the blocks it already has (inserted
 * as they filled), the sequence's own references go. */
static void detach(cv_sched *s, cv_sched_req *r)
{
    if (r->pool_acc) /* its rows are computed again from the start */
        memset(r->pool_acc, 0, (size_t)r->n_embd * sizeof *r->pool_acc);
    if (r->tree_at)
        r->tree_at->pins--;
    r->tree_at = NULL;
    r->n_tree = 0;
    cv_engine_seq_close(s->e, r->seq);
    r->seq = -1;
    r->n_done = 0;
    r->n_redo = 0;
    r->snap_branch = 0;
    r->n_snap_hints = 0;
}

static void retire(cv_sched *s, cv_sched_req *r, cv_finish_reason why, const cv_err *err)
{
    detach(s, r);
    s->eng.n_requests++;
    running_remove(s, r);
    cv_sched_event ev = base_event(r, err ? CV_SCHED_ERROR : CV_SCHED_DONE);
    if (err)
        ev.err = *err;
    else
        ev.finish = why;
    push_final(r, &ev);
}

static void preempt(cv_sched *s, cv_sched_req *r)
{
    detach(s, r);
    s->eng.preemptions++;
    running_remove(s, r);
    pthread_mutex_lock(&s->mu);
    r->phase = PHASE_WAITING;
    r->next = s->q_head;
    s->q_head = r;
    if (!s->q_tail)
        s->q_tail = r;
    s->q_len++;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the prefix tree's side ---- */

/* The blocks of r the tree may take. All it has computed, on a model whose
 * bits do not depend on how a sequence's positions were split into calls;
 * otherwise only its prompt's whole chunks of the split grid: those are
 * what a cold run of any longer prompt computes the same way (as one
 * prefill chunk, or pieces on the grid), while a decoded position or the
 * prompt's last partial chunk was computed in pieces another prompt
 * would not repeat. A cached path is then bits a cold run computes, for
 * every prefix it spells, and so are the snapshots on it. A recurrent
 * state resumes only at a snapshot, which lies on the grid inside a prompt,
 * so nothing resumable is lost. */
static int32_t tree_limit(const cv_sched *s, const cv_sched_req *r)
{
    const int32_t align = s->mem.split_align;
    if (align == 1 && s->mem.step_run == INT32_MAX)
        return r->n_done / CV_KV_BLOCK;
    return CV_MIN(r->n_done, r->n_prompt / align * align) / CV_KV_BLOCK;
}

/* Puts r's newly filled blocks (tree_limit) into the tree and moves its
 * pin to the deepest one. */
static void tree_insert(cv_sched *s, cv_sched_req *r)
{
    int32_t full = tree_limit(s, r);
    if (!s->prefix_cache || r->pool || full <= r->n_tree)
        return;
    rx_node *at = r->tree_at;
    for (int32_t i = r->n_tree; i < full; i++) {
        cv_mem_span span;
        const bool held = cv_engine_seq_span(s->e, r->seq, i, &span);
        assert(held);
        (void)held;
        at = rx_insert(&s->tree, at, r->tokens + (size_t)i * CV_KV_BLOCK, &span);
    }
    if (r->tree_at)
        r->tree_at->pins--;
    at->pins++;
    r->tree_at = at;
    r->n_tree = full;
    rx_touch(&s->tree, at);
}

/* Each running sequence may draw one new block of every group next step:
 * what admission and snapshots leave room for. */
static void add_growth(const cv_sched *s, cv_mem_need *need)
{
    for (int32_t g = 0; g < s->mem.n_groups; g++)
        need->blocks[g] += s->n_running;
}

/* ---- snapshots (models with recurrent state; policy in sched_int.h) ---- */

/* The last snapshot position before r's prompt's last token: the deepest
 * a request with this prompt can resume, since it computes that token for
 * its logits. */
static int32_t prompt_snap_end(const cv_sched *s, const cv_sched_req *r)
{
    return (r->n_prompt - 1) / s->snap_unit * s->snap_unit;
}

static bool is_snap_point(const cv_sched *s, const cv_sched_req *r, int32_t at)
{
    if (!s->snap_every || at <= 0 || at % s->snap_unit || at > prompt_snap_end(s, r))
        return false;
    if (at % s->snap_every == 0 || at == prompt_snap_end(s, r) || at == r->snap_branch)
        return true;
    for (int32_t i = 0; i < r->n_snap_hints; i++)
        if (r->snap_hint[i] == at)
            return true;
    return false;
}

/* The first snapshot point after r->n_done (0: none left): a prefill chunk
 * ends there, since a state exists only at the end of a forward call. */
static int32_t next_snap(const cv_sched *s, const cv_sched_req *r)
{
    const int32_t end = prompt_snap_end(s, r);
    if (!s->snap_every || r->n_done >= end)
        return 0;
    int32_t at = CV_MIN(end, (r->n_done / s->snap_every + 1) * s->snap_every);
    if (r->snap_branch > r->n_done)
        at = CV_MIN(at, r->snap_branch);
    for (int32_t i = 0; i < r->n_snap_hints; i++)
        if (r->snap_hint[i] > r->n_done)
            at = CV_MIN(at, r->snap_hint[i]);
    return at;
}

/* After a forward call: when r has just reached a snapshot point that its
 * deepest tree node ends at and that node has no snapshot yet, one is taken
 * and given to the node. Best effort: it may evict cold nodes but leaves
 * every running sequence its block of growth, so a snapshot never causes a
 * preemption. */
static void snap_take(cv_sched *s, cv_sched_req *r)
{
    rx_node *at = r->tree_at;
    if (!at || at->span.snap || r->n_tree * CV_KV_BLOCK != r->n_done || !is_snap_point(s, r, r->n_done))
        return;
    cv_mem_need need = { 0 };
    cv_engine_snapshot_need(s->e, &need);
    add_growth(s, &need);
    cv_snapshot *snap;
    if (!rx_evict(&s->tree, &need) || cv_engine_snapshot_take(s->e, r->seq, &snap, NULL) != 0)
        return;
    rx_set_snapshot(&s->tree, at, snap);
    s->eng.snapshots_taken++;
}

/* Asks running request p, whose prompt r waits for, to snapshot where r's
 * prompt leaves p's (the whole blocks they share beyond `from`, which they
 * are known to share), so r resumes exactly there. */
static void hint_snap(const cv_sched *s, cv_sched_req *p, const cv_sched_req *r, int32_t from)
{
    if (!s->snap_every || p->n_snap_hints == CV_SCHED_SNAP_HINTS)
        return;
    const int32_t lim = CV_MIN(r->n_tokens - 1, p->n_tokens);
    int32_t i = from;
    while (i < lim && p->tokens[i] == r->tokens[i])
        i++;
    const int32_t at = i / s->snap_unit * s->snap_unit;
    if (at <= p->n_done)
        return;
    for (int32_t k = 0; k < p->n_snap_hints; k++)
        if (p->snap_hint[k] == at)
            return;
    p->snap_hint[p->n_snap_hints++] = at;
}

/* True when a running sequence is computing, right now, the block of r's
 * prompt that comes after what the tree holds, and will put it in the tree
 * (tree_limit): r then waits a step or more and finds the block cached,
 * instead of computing the same prefix in parallel (four agents that start
 * together with one system prompt compute it once). The wait ends when
 * that sequence moves past the block (it inserts each block as it fills)
 * or stops running. */
static bool wait_for_prefix(const cv_sched *s, const cv_sched_req *r, int32_t m)
{
    const int32_t upto = (m + 1) * CV_KV_BLOCK;
    if (upto > r->n_tokens - 1) /* that block holds r's last token: r computes it anyway */
        return false;
    for (int32_t i = 0; i < s->n_running; i++) {
        cv_sched_req *p = s->running[i];
        const bool cached_by_p = !p->pool && (s->mem.split_align == 1 ||
                                              upto <= p->n_prompt / s->mem.split_align * s->mem.split_align);
        if (p->n_done < upto && p->n_tokens >= upto && cached_by_p &&
            !memcmp(p->tokens, r->tokens, (size_t)upto * sizeof *r->tokens)) {
            hint_snap(s, p, r, upto);
            return true;
        }
    }
    return false;
}

typedef enum admit_result { ADMIT_OK, ADMIT_NO_ROOM, ADMIT_WAIT } admit_result;

/* Tries to start r (off the queue while this runs). must: nothing else
 * runs, so r is admitted whatever the pool holds (submit checked it fits
 * alone). */
static admit_result admit(cv_sched *s, cv_sched_req *r, bool must)
{
    cv_engine *e = s->e;
    const int32_t n_known = r->n_tokens;
    int32_t m = 0;
    if (s->prefix_cache && !r->pool) {
        m = rx_match(&s->tree, r->tokens, n_known, s->path, n_known / CV_KV_BLOCK);
        if (!must && wait_for_prefix(s, r, m))
            return ADMIT_WAIT;
    }
    /* At least the last known token is computed: its logits are needed.
     * How deep the matched path resumes is the engine's call: anywhere for
     * plain KV (a whole cached prompt shares its last block and rewrites
     * its last position, which copies the block first); only where a
     * snapshot was kept for a recurrent state; only where the window
     * layers' blocks the next position sees are still held. */
    for (int32_t i = 0; i < m; i++)
        s->spans[i] = &s->path[i]->span;
    const int32_t reuse = cv_engine_resume_len(e, s->spans, m, n_known - 1);
    const int32_t m_share = ceil_blocks(reuse);
    int32_t seq;
    cv_err err = { 0 };
    if (cv_engine_seq_open(e, &seq, &err)) {
        assert(!"a sequence slot is free whenever a request is admitted");
        return ADMIT_NO_ROOM;
    }
    if (reuse > 0) {
        int rc = cv_engine_seq_restore(e, seq, s->spans, m, reuse, &err);
        assert(rc == 0);
        (void)rc;
    }
    cv_mem_need need = { 0 };
    cv_engine_seq_need(e, seq, n_known - reuse, &need);
    if (!must) {
        add_growth(s, &need);
        if (cv_engine_mem_short(e, &need, NULL) > 0) {
            cv_mem_need more = { 0 };
            if (s->prefix_cache)
                rx_evictable(&s->tree, &more);
            if (cv_engine_mem_short(e, &need, &more) > 0) {
                cv_engine_seq_close(e, seq);
                return ADMIT_NO_ROOM;
            }
        }
    }
    r->seq = seq;
    r->n_done = reuse;
    r->tree_at = m_share ? s->path[m_share - 1] : NULL;
    if (r->tree_at)
        r->tree_at->pins++;
    r->n_tree = m_share;
    /* Where the prompt leaves the cached path is where the next request
     * with this prefix will want to resume. */
    const int32_t branch = m * CV_KV_BLOCK / s->snap_unit * s->snap_unit;
    r->snap_branch = s->snap_every && branch > reuse ? branch : 0;
    r->admit_order = ++s->admit_counter;
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->st_cached = reuse; /* the first admission's hit is the request's (usage: cached tokens) */
        s->eng.lookups += s->prefix_cache && !r->pool;
        s->eng.prompt_tokens += r->n_prompt;
        s->eng.cached_tokens += reuse;
        s->eng.hits += reuse > 0;
        s->eng.snapshot_hits += reuse > 0 && s->mem.state_bytes > 0;
    }
    running_add(s, r);
    return ADMIT_OK;
}

/* ---- sampling ---- */

static bool is_stop(const cv_sched_req *r, int32_t tok)
{
    for (int32_t i = 0; i < r->n_stop; i++)
        if (r->stop[i] == tok)
            return true;
    return false;
}

/* r's known tokens are all computed and logits is its row: sample the next
 * token, emit it, and end the request if it is done. False when r ended:
 * it may be freed already, so the caller must not touch it again. */
static bool sample(cv_sched *s, cv_sched_req *r, const float *logits)
{
    const cv_engine_params *ep = cv_engine_params_get(s->e);
    if (!r->prompt_done_sent) {
        r->prompt_done_sent = true;
        for (int32_t i = 0; i < r->n_prompt; i++)
            cv_sampler_accept(r->sampler, r->tokens[i]);
        cv_sched_event ev = base_event(r, CV_SCHED_PROMPT_DONE);
        cv_sched_push_event(r, &ev);
    }
    int32_t tok;
    if (r->hook) {
        cv_err err = { 0 };
        if (r->hook->choose(r->hook_ud, r->sampler, logits, s->n_vocab, &tok, &err) != 0 || tok < 0 ||
            tok >= s->n_vocab) {
            if (!err.code)
                cv_err_set(&err, CV_EINVAL, "sampling hook: chose token %d, must be 0..%d", tok, s->n_vocab - 1);
            retire(s, r, CV_FINISH_NONE, &err);
            return false;
        }
    } else {
        tok = cv_sampler_sample(r->sampler, logits);
    }
    cv_sampler_accept(r->sampler, tok);
    r->tokens[r->n_tokens++] = tok;
    r->n_gen++;
    s->eng.n_tokens_generated++;
    uint64_t now = cv_now_ns();
    pthread_mutex_lock(&s->mu);
    if (!r->t_first_token)
        r->t_first_token = now;
    r->t_last_token = now;
    r->phase = PHASE_DECODE;
    pthread_mutex_unlock(&s->mu);

    cv_sched_event ev = base_event(r, CV_SCHED_TOKEN);
    ev.token = tok;
    if (r->logprobs || r->n_top > 0) {
        ev.n_top = r->n_top;
        cv_logprobs(logits, s->n_vocab, tok, r->n_top, &ev.logprob, ev.top_tokens, ev.top_logprobs);
    }
    cv_sched_push_event(r, &ev);
    cv_finish_reason why = is_stop(r, tok)                   ? CV_FINISH_STOP
                           : r->n_gen >= r->max_tokens       ? CV_FINISH_LENGTH
                           : atomic_load(&r->cancel)         ? CV_FINISH_CANCELED
                           : r->n_tokens > ep->n_ctx         ? CV_FINISH_CONTEXT /* its last token would go past */
                                                             : CV_FINISH_NONE;
    if (why == CV_FINISH_NONE)
        return true;
    retire(s, r, why, NULL);
    return false;
}

/* ---- embeddings ---- */

/* r's n rows of the step, hidden states ld apart (the positions up to
 * r->n_done, which already counts them), into its pool. */
static void pool_rows(cv_sched_req *r, const float *rows, int64_t ld, int32_t n)
{
    const int32_t first = r->n_done - n;
    for (int32_t k = 0; k < n; k++) {
        const int32_t p = first + k;
        const float *h = rows + (int64_t)k * ld;
        if (r->pool == CV_POOL_MEAN)
            for (int32_t i = 0; i < r->n_embd; i++)
                r->pool_acc[i] += h[i];
        else if ((r->pool == CV_POOL_CLS && p == 0) || (r->pool == CV_POOL_LAST && p == r->n_prompt - 1))
            for (int32_t i = 0; i < r->n_embd; i++)
                r->pool_acc[i] = h[i];
    }
}

/* r's prompt is all computed: its vector (the mean taken, scaled to unit
 * length, in double until the end), then it leaves. */
static void finish_embedding(cv_sched *s, cv_sched_req *r)
{
    const double scale = r->pool == CV_POOL_MEAN ? 1.0 / r->n_prompt : 1.0;
    double ss = 0;
    for (int32_t i = 0; i < r->n_embd; i++)
        ss += (r->pool_acc[i] * scale) * (r->pool_acc[i] * scale);
    const double inv = ss > 0 ? 1.0 / sqrt(ss) : 0;
    for (int32_t i = 0; i < r->n_embd; i++)
        r->embd[i] = (float)(r->pool_acc[i] * scale * inv);
    cv_sched_event ev = base_event(r, CV_SCHED_EMBEDDING);
    ev.embedding = r->embd;
    ev.n_embd = r->n_embd;
    cv_sched_push_event(r, &ev);
    retire(s, r, CV_FINISH_STOP, NULL);
}

/* ---- one step ---- */

static void end_cancelled(cv_sched *s)
{
    for (int32_t i = s->n_running - 1; i >= 0; i--)
        if (atomic_load(&s->running[i]->cancel))
            retire(s, s->running[i], CV_FINISH_CANCELED, NULL);
    cv_sched_req *gone = NULL;
    pthread_mutex_lock(&s->mu);
    cv_sched_req **pp = &s->q_head, *last = NULL;
    while (*pp) {
        cv_sched_req *r = *pp;
        if (atomic_load(&r->cancel)) {
            *pp = r->next;
            s->q_len--;
            r->next = gone;
            gone = r;
        } else {
            last = r;
            pp = &r->next;
        }
    }
    s->q_tail = last;
    pthread_mutex_unlock(&s->mu);
    if (!gone)
        return;
    for (cv_sched_req *r = gone; r; r = r->next)
        s->eng.n_requests++;
    publish(s);
    while (gone) {
        cv_sched_req *next = gone->next;
        cv_sched_finish_waiting(gone);
        gone = next;
    }
}

/* Admits waiting requests in arrival order until one does not fit (first
 * come, first served: a large request is not overtaken forever). A request
 * waiting for a prefix another is computing keeps its place, and those
 * behind it may go. */
static void admit_waiting(cv_sched *s)
{
    cv_sched_req *prev = NULL; /* the last request left in the queue this round */
    while (s->n_running < s->max_running) {
        pthread_mutex_lock(&s->mu);
        cv_sched_req *r = prev ? prev->next : s->q_head;
        if (r) { /* off the queue while it is tried (only this thread removes) */
            if (prev)
                prev->next = r->next;
            else
                s->q_head = r->next;
            if (s->q_tail == r)
                s->q_tail = prev;
            s->q_len--;
            r->next = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        if (!r)
            return;
        admit_result res = admit(s, r, s->n_running == 0);
        if (res == ADMIT_OK)
            continue;
        pthread_mutex_lock(&s->mu); /* back where it was */
        if (prev) {
            r->next = prev->next;
            prev->next = r;
        } else {
            r->next = s->q_head;
            s->q_head = r;
        }
        if (!r->next)
            s->q_tail = r;
        s->q_len++;
        pthread_mutex_unlock(&s->mu);
        if (res == ADMIT_NO_ROOM)
            return;
        prev = r;
    }
}

/* Makes the blocks running[i] needs to grow by n_new free, on top of
 * *reserved (what the batch's earlier sequences will draw): eviction, then
 * preempting the newest running sequences (all newer than running[i], so
 * none is in the batch yet). False when running[i] itself had to go:
 * preempted, or ended because the pool cannot hold it even alone. */
static bool make_room(cv_sched *s, int32_t i, int32_t n_new, cv_mem_need *reserved)
{
    cv_sched_req *r = s->running[i];
    for (;;) {
        cv_mem_need need = *reserved;
        cv_engine_seq_need(s->e, r->seq, n_new, &need);
        if (cv_engine_mem_short(s->e, &need, NULL) == 0 || (s->prefix_cache && rx_evict(&s->tree, &need))) {
            *reserved = need;
            return true;
        }
        cv_sched_req *victim = s->running[s->n_running - 1];
        if (victim != r) {
            preempt(s, victim);
            continue;
        }
        if (i == 0) {
            /* First in the batch, nothing newer left, still short: the pool
             * cannot hold this sequence. */
            retire(s, r, CV_FINISH_CONTEXT, NULL);
            return false;
        }
        preempt(s, r);
        return false;
    }
}

/* Drafts for r, which decodes (one known token to compute): into
 * r->tokens past the known ones (its array holds max_tokens generated
 * tokens, and a draft never exceeds what r may still generate). At most
 * k_max, r's own draft_k, what the context holds, and what the pool has
 * free without evicting or preempting anything, and no more than are likely
 * enough to be taken to pay for their attention (cv_sched_draft_worth:
 * deep in a context a drafted token costs a large part of a step). A
 * request with a sampling hook drafts too: the hook is still called once
 * per emitted token, in order, on that token's own logits (sample_drafted). */
static int32_t draft_for(cv_sched *s, cv_sched_req *r, int32_t k_max, const cv_mem_need *reserved)
{
    const cv_engine_params *ep = cv_engine_params_get(s->e);
    int32_t k = CV_MIN(CV_MIN(k_max, r->draft_k), r->max_tokens - r->n_gen - 1);
    k = CV_MIN(k, ep->n_ctx - r->n_tokens);
    if (k <= 0)
        return 0;
    k = cv_sched_draft(r->tokens, r->n_tokens, k, r->tokens + r->n_tokens);
    /* A drafted token attends the context as the decoding one does */
    const double att = s->att_per_pos * r->n_tokens;
    const int32_t worth = cv_sched_draft_worth(att, s->step_base + att, r->draft_accept, k);
    s->eng.draft_declined += k - worth;
    if (k > 0 && worth == 0) /* drift back towards the prior, so a request that stopped drafting tries again */
        r->draft_accept += (CV_SCHED_DRAFT_PRIOR - r->draft_accept) / 32;
    k = worth;
    for (; k > 0; k--) {
        cv_mem_need need = *reserved;
        cv_engine_seq_need(s->e, r->seq, 1 + r->n_redo + k, &need);
        if (cv_engine_mem_short(s->e, &need, NULL) == 0)
            break;
    }
    return k;
}

/* A prefill chunk of r's pending tokens, n of them within the step's
 * budget and n_max at most (the budget and the batch's spare room), cut
 * where the engine says a sequence's bits do not depend on how its
 * positions were split (cv_mem_info): at a multiple of split_align or the
 * prompt's end, never across it, and past it (generated tokens recomputed
 * after a preemption) at most step_run tokens, as they were decoded. When
 * n reaches no grid point the chunk runs on to the next one if n_max
 * allows (so a budget under one grid chunk, a step's decodes taking their
 * share of it, still computes exact chunks); else r waits for a step with
 * room (0: the first prefill of a step gets the spare room of one grid
 * chunk where n_batch allows, and the budget comes back as older prompts
 * finish), or, where the engine's n_batch cannot hold a grid chunk at all,
 * is cut where the budget ends: progress first, exactness lost. Without
 * recurrent state any cut is exact: n unchanged. */
static int32_t exact_chunk(const cv_sched *s, const cv_sched_req *r, int32_t n, int32_t n_max)
{
    const int32_t align = s->mem.split_align, from = r->n_done;
    if (align == 1 && s->mem.step_run == INT32_MAX)
        return n;
    if (from >= r->n_prompt)
        return CV_MIN(n, s->mem.step_run);
    const int32_t to = CV_MIN(from + n, r->n_prompt);
    if (to == r->n_prompt || to / align * align > from)
        return (to == r->n_prompt ? to : to / align * align) - from;
    const int32_t next = CV_MIN((from / align + 1) * align, r->n_prompt);
    if (next - from <= n_max)
        return next - from;
    return s->batch_cap >= align ? 0 : to - from;
}

/* Whether r decodes: its newest token is all it has to compute besides
 * what a rollback left to recompute (n_redo). */
static bool decoding(const cv_sched_req *r) { return !r->pool && r->n_tokens - r->n_done == 1 + r->n_redo; }

/* Builds the batch; returns its token count. Decoding sequences may add
 * drafted tokens (speculation) while the step's decode tokens, drafts
 * included, stay within draft_max + 1: a step of that many tokens reads
 * the weights once and costs about what one token does. Sequences that
 * decode together use the same room, so with draft_max + 1 of them nobody
 * drafts, and a rollback's recomputed tokens take their share of it too.
 * A drafting sequence is checkpointed first, so a partly taken draft cuts
 * back exactly. Every running sequence keeps its own row of logits. */
static int32_t build_batch(cv_sched *s, int32_t *n_reqs)
{
    int32_t n_dec = 0;
    for (int32_t i = 0; i < s->n_running; i++)
        n_dec += decoding(s->running[i]);
    int32_t budget = s->batch_tokens - n_dec; /* for prefill chunks, drafts and recomputed tokens */
    int32_t extra = s->batch_cap - s->batch_tokens; /* a prefill chunk's run past the budget to the grid */
    int32_t spare_rows = CV_MIN(s->n_logits - s->n_running, s->draft_max + 1 - n_dec);
    int32_t nt = 0, nr = 0;
    cv_mem_need reserved = { 0 };
    s->b_hidden = false;
    for (int32_t i = 0; i < s->n_running; i++) {
        cv_sched_req *r = s->running[i];
        const int32_t pending = r->n_tokens - r->n_done;
        const bool dec = decoding(r) && r->n_redo <= CV_MAX(budget, 0) && 1 + r->n_redo <= s->mem.step_run;
        int32_t n = dec ? pending : CV_MIN(pending, budget), k = 0;
        if (!dec) { /* a prefill chunk ends where the state is to be snapshotted */
            int32_t n_max = CV_MIN(pending, CV_MAX(budget, 0) + extra);
            const int32_t at = next_snap(s, r);
            if (at > r->n_done)
                n = CV_MIN(n, at - r->n_done), n_max = CV_MIN(n_max, at - r->n_done);
            n = exact_chunk(s, r, CV_MAX(n, 0), n_max);
            extra -= CV_MAX(0, n - CV_MAX(budget, 0));
        }
        if (n <= 0)
            continue;
        if (dec && s->draft_max > 0) {
            /* the step's tokens of r stay within step_run: verified drafts
             * then compute what decoding them one by one would */
            const int32_t room = CV_MIN(s->draft_max, s->mem.step_run - 1) - r->n_redo;
            k = draft_for(s, r, CV_MIN(CV_MIN(room, spare_rows), CV_MAX(budget, 0) - r->n_redo), &reserved);
            n += k;
        }
        if (!make_room(s, i, n, &reserved))
            break; /* r was the newest left: nothing after it */
        if (k > 0)
            cv_engine_seq_checkpoint(s->e, r->seq);
        for (int32_t j = 0; j < n; j++) {
            const int32_t p = r->n_done + j;
            s->b_tok[nt] = r->tokens[p];
            s->b_seq[nt] = r->seq;
            s->b_pos[nt] = p;
            s->b_want[nt] = !r->pool && p >= r->n_tokens - 1;
            nt++;
        }
        s->b_hidden |= r->pool != CV_POOL_NONE;
        s->b_req[nr] = r;
        s->b_n[nr] = n;
        s->b_draft[nr] = k;
        nr++;
        budget -= dec ? n - 1 : n; /* a decode token was counted up front */
        spare_rows -= k;
    }
    *n_reqs = nr;
    return nt;
}

/* r has computed its known tokens plus k drafted ones after them, and
 * logits holds their k + 1 rows: samples row by row while the chosen
 * token is the drafted one (each such match makes the next row valid),
 * then forgets the positions past the last match. Every token is chosen
 * exactly as without a draft (same logits, same sampler calls in the same
 * order), so speculation changes speed, never output. */
static void sample_drafted(cv_sched *s, cv_sched_req *r, const float *logits, int32_t k)
{
    int32_t draft[CV_SCHED_DRAFT_MAX];
    memcpy(draft, r->tokens + r->n_tokens, (size_t)k * sizeof *draft);
    int32_t taken = 0;
    bool running;
    for (;;) {
        tree_insert(s, r);
        running = sample(s, r, logits + (size_t)taken * (size_t)s->n_vocab);
        if (!running || taken == k || r->tokens[r->n_tokens - 1] != draft[taken])
            break;
        r->n_done++; /* the drafted token at this position was the one chosen */
        taken++;
    }
    s->eng.draft_tokens += k;
    s->eng.draft_accepted += taken;
    if (!running)
        return;
    /* taken successes, then a failure if one was refused */
    for (int32_t i = 0; i <= taken && i < k; i++)
        r->draft_accept += ((float)(i < taken) - r->draft_accept) / 8;
    r->draft_k = taken == k ? CV_MIN(2 * k, s->draft_max) : CV_MAX(taken, 1);
    const int32_t kept = cv_engine_seq_truncate(s->e, r->seq, r->n_done);
    if (kept < r->n_done) { /* back at the checkpoint before the draft: the taken tokens go again */
        r->n_redo = r->n_done - kept;
        s->eng.draft_recomputed += r->n_redo;
        r->n_done = kept;
    }
}

/* The running averages draft_for weighs drafts by, from steps where every
 * sequence decodes (prefill chunks cost otherwise): the rest of a step
 * besides attention, and attention per position attended by a row of the
 * step (decoding or drafted: a drafted row costs 0.65-0.8 of a decoding
 * one, so steps with drafts pull the figure down a little), measured where
 * the step attends 2048 positions or more, so that the clock resolves it. */
static void measure_step(cv_sched *s, int32_t nr)
{
    if (s->draft_max == 0) /* nothing to weigh, and the engine's profile is off */
        return;
    const cv_engine_stats *st = cv_engine_last_stats(s->e);
    double attended = 0;
    for (int32_t j = 0; j < nr; j++) {
        const cv_sched_req *r = s->b_req[j];
        if (s->b_n[j] - s->b_draft[j] != 1 || r->n_tokens - r->n_done != 1)
            return;
        attended += (double)s->b_n[j] * (r->n_done + 1);
    }
    const double base = st->t_total - st->t_attention;
    s->step_base += s->step_base > 0 ? (base - s->step_base) / 8 : base;
    if (attended >= 2048) {
        const double a = st->t_attention / attended;
        s->att_per_pos += s->att_per_pos > 0 ? (a - s->att_per_pos) / 8 : a;
    }
}

static void step(cv_sched *s)
{
    end_cancelled(s);
    admit_waiting(s);
    int32_t nr;
    const int32_t nt = s->n_running ? build_batch(s, &nr) : 0;
    if (nt == 0) {
        publish(s);
        return;
    }
    const float *logits;
    int32_t n_logits;
    cv_err err = { 0 };
    cv_batch b = { .n_tokens = nt, .token = s->b_tok, .seq = s->b_seq, .pos = s->b_pos, .want = s->b_want };
    cv_engine_keep_hidden(s->e, s->b_hidden);
    if (cv_engine_forward(s->e, &b, &logits, &n_logits, &err)) {
        /* The batch was checked against every limit the engine has, so this
         * is a bug or an exhausted machine: fail what was in it. */
        cv_err_prefix(&err, "scheduler step: ");
        for (int32_t j = 0; j < nr; j++)
            retire(s, s->b_req[j], CV_FINISH_NONE, &err);
        publish(s);
        return;
    }
    s->eng.steps++;
    measure_step(s, nr);
    /* Progress first, for every request of the batch, so that figures
     * published while the loop below ends some of them are consistent with
     * the pool. */
    for (int32_t j = 0; j < nr; j++) {
        cv_sched_req *r = s->b_req[j];
        const int32_t n = s->b_n[j] - s->b_draft[j]; /* drafted tokens settle when sampled */
        const int32_t last = r->n_done + n - 1;
        const int32_t redo = CV_MIN(r->n_redo, n); /* counted when the draft was cut back */
        r->n_redo -= redo;
        /* Everything else but a generated token fed for the first time is
         * prefill (a recompute after preemption included). */
        const int32_t computed = n - redo - (last == r->n_tokens - 1 && last >= r->n_prompt);
        s->eng.n_tokens_prompt += computed;
        r->st_computed += computed;
        r->n_done += n;
    }
    int32_t row = 0;
    const int64_t ld = cv_engine_model(s->e)->hp.n_embd;
    for (int32_t j = 0, brow = 0; j < nr; brow += s->b_n[j], j++) {
        cv_sched_req *r = s->b_req[j];
        const int32_t k = s->b_draft[j];
        if (r->pool) {
            pool_rows(r, cv_engine_hidden(s->e) + brow * ld, ld, s->b_n[j]);
            if (r->n_done == r->n_prompt)
                finish_embedding(s, r);
            continue;
        }
        if (k > 0) {
            assert(row + k < n_logits);
            sample_drafted(s, r, logits + (size_t)row * (size_t)s->n_vocab, k);
            row += k + 1;
            continue;
        }
        tree_insert(s, r);
        snap_take(s, r);
        if (r->n_done == r->n_tokens) {
            assert(row < n_logits);
            sample(s, r, logits + (size_t)row * (size_t)s->n_vocab);
            row++;
        }
    }
    publish(s);
}

void *cv_sched_engine_main(void *arg)
{
    cv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->quit && !s->q_head && s->n_running == 0) {
            if (s->shared) { /* out of work: the others get its threads */
                cv_sched_share_leave(s->share, s);
                s->shared = false;
            }
            pthread_cond_wait(&s->cond, &s->mu);
        }
        bool quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        if (quit)
            break;
        if (s->share) {
            cv_engine_set_threads(s->e, cv_sched_share_enter(s->share, s));
            s->shared = true;
        }
        step(s);
    }
    if (s->shared)
        cv_sched_share_leave(s->share, s);
    while (s->n_running > 0)
        retire(s, s->running[s->n_running - 1], CV_FINISH_CANCELED, NULL);
    publish(s);
    return NULL;
}

/* sched_int.h — the scheduler's guts, shared by its files only: the request
 * (caller side: event queue and cancel flag; engine side: tokens, sequence,
 * progress), the scheduler, the radix prefix tree over the engine's memory
 * spans (radix.c), the cache file (cache_file.c), and the hash they share.
 *
 * Threads: fields marked [engine] belong to the engine thread; [mu] are
 * guarded by cv_sched.mu; [r.mu] by the request's own mutex; [const] are
 * fixed at submit. */
#ifndef CV_SCHED_INT_H
#define CV_SCHED_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sched/sched.h"

/* ---- snapshot policy (models with recurrent state) ----
 * A prompt's state is snapshotted where a later request is likely to
 * resume: every max(CV_SCHED_SNAP_EVERY_MIN, the blocks one snapshot takes)
 * blocks, so snapshots at most about double what a long prompt's KV holds
 * and come no closer than 256 positions; where the prompt leaves the path
 * it found in the tree (the branch point the next request with that prefix
 * resumes from); where a request waiting for this one's prefix leaves it
 * (at most CV_SCHED_SNAP_HINTS such points); and at the last snapshot
 * position before the prompt's last token. Snapshot positions are
 * multiples of snap_unit: whole blocks, and whole chunks of the engine's
 * split grid (cv_mem_info.split_align), so that a request resumed from one
 * computes the bits a cold run does. */
#define CV_SCHED_SNAP_EVERY_MIN 16
#define CV_SCHED_SNAP_HINTS 4

/* ---- the radix prefix tree (radix.c) ----
 * One node per block of positions: the CV_KV_BLOCK token ids it holds and
 * the engine's memory span for them (a KV block per layer group, and on a
 * model with recurrent state perhaps a snapshot of it at the block's end),
 * under the node of the block before it. A path from the root spells a
 * prefix; children are found through one hash table keyed by (parent,
 * tokens). Every node holds one reference on each block of its span and
 * owns its snapshot, so they outlive the sequences that computed them;
 * where a path can be resumed is the engine's judgement
 * (cv_engine_resume_len), not the tree's.
 *
 * LRU: every node sits on one list, least recently used first. Touching a
 * node moves it and then each of its ancestors to the recent end, so a
 * parent is always more recent than its children; a single walk from the
 * old end therefore meets children before their parents and can evict a
 * whole cold branch leaf by leaf. A node is evictable when it is a leaf, no
 * running request is pinned to it, and the tree's are its blocks' only
 * references. Evicting it frees its snapshot too. */
typedef struct rx_node {
    int32_t tokens[CV_KV_BLOCK];
    cv_mem_span span;
    int32_t n_children;
    int32_t pins;            /* running requests whose deepest inserted node this is */
    uint32_t depth;          /* blocks from the root: 1 for a first block */
    int32_t file_ix;         /* cache_file.c's scratch while saving */
    uint64_t id;             /* unique, for the hash key */
    uint64_t hash;           /* of (parent id, tokens) */
    struct rx_node *parent;  /* the root sentinel for first blocks */
    struct rx_node *hnext;   /* hash chain */
    struct rx_node *prev, *next; /* LRU list */
} rx_node;

typedef struct radix {
    cv_engine *e;
    rx_node root;            /* sentinel: no block, never on the LRU list */
    rx_node lru;             /* list sentinel: lru.next is the least recent */
    rx_node **buckets;
    size_t n_buckets;        /* power of two */
    int32_t n_nodes;
    int32_t n_snaps;         /* nodes holding a snapshot */
    uint64_t next_id;
    int64_t n_evicted;
} radix;

void rx_init(radix *t, cv_engine *e);
/* Drops every node and its block reference. */
void rx_fini(radix *t);
/* The longest cached prefix of tokens[0..n) in whole blocks: fills path
 * with the matched nodes (at most max) and returns their count. Touches
 * the deepest one (LRU). */
int32_t rx_match(radix *t, const int32_t *tokens, int32_t n, rx_node **path, int32_t max);
/* The child of parent (NULL: the root) holding tokens[0..CV_KV_BLOCK): an
 * existing one, or a new node that takes a reference on each block of span
 * (its snapshot, if any, stays the caller's). Does not touch; callers touch
 * the deepest node once they are done. */
rx_node *rx_insert(radix *t, rx_node *parent, const int32_t *tokens, const cv_mem_span *span);
/* Gives node the snapshot (the tree owns it from here), unless it holds
 * one already: then snap is freed. */
void rx_set_snapshot(radix *t, rx_node *node, cv_snapshot *snap);
/* Moves node and its ancestors to the recent end (node first). */
void rx_touch(radix *t, rx_node *node);
/* Evicts least recently used evictable leaves until the pools hold *need
 * (cv_engine_mem_short) or nothing more is evictable; true when they hold
 * it. */
bool rx_evict(radix *t, const cv_mem_need *need);
/* Adds to *acc the blocks evictions could free now (nodes not pinned whose
 * blocks only the tree holds, with their snapshots). O(nodes). */
void rx_evictable(const radix *t, cv_mem_need *acc);
/* Calls fn on every node, most recently used first (so parents before
 * their children). Stops early when fn returns false. */
void rx_walk_recent(const radix *t, bool (*fn)(void *ud, const rx_node *n), void *ud);

/* ---- hashing (cache file checksums, model identity, tree keys) ---- */

uint64_t cv_sched_hash(uint64_t seed, const void *data, size_t n);

/* ---- requests ---- */

typedef enum req_phase { PHASE_WAITING, PHASE_PREFILL, PHASE_DECODE } req_phase;

struct cv_sched_req {
    cv_sched *s;             /* [const] */
    uint64_t id;             /* [const] 1, 2, ... in submit order */
    _Atomic bool cancel;
    _Atomic int refs;        /* the caller's and the scheduler's */

    /* [const] the request as submitted */
    int32_t n_prompt;
    int32_t max_tokens;
    int32_t *stop;
    int32_t n_stop;
    int32_t n_top;
    bool logprobs;
    cv_sampler *sampler;     /* [engine] after submit */
    const cv_sched_hook *hook;
    void *hook_ud;
    uint64_t t_submit;       /* ns */
    cv_pooling pool;         /* CV_POOL_NONE, or an embedding request: */
    double *pool_acc;        /* [engine] [n_embd] the pooled hidden states so far (a preemption starts over) */
    float *embd;             /* [n_embd] the vector, set before its event */
    int32_t n_embd;

    /* [engine] progress */
    int32_t *tokens;         /* [n_prompt + max_tokens] prompt, then generated tokens */
    int32_t n_tokens;        /* known tokens: n_prompt + n_gen */
    int32_t n_gen;
    int32_t seq;             /* engine sequence; -1 while not running */
    int32_t n_done;          /* positions of seq computed: tokens[0..n_done) are in the KV cache */
    rx_node *tree_at;        /* deepest tree node covering seq's blocks (pinned); NULL: the root */
    int32_t n_tree;          /* blocks of seq covered by the tree path to tree_at */
    int32_t n_redo;          /* positions after n_done a rollback left to recompute (known, computed once
                              * already, no logits wanted): a draft's taken tokens on a model whose state
                              * cut back to the checkpoint before them */
    int32_t snap_branch;     /* a snapshot position where this prompt leaves the tree's path (0: none) */
    int32_t snap_hint[CV_SCHED_SNAP_HINTS]; /* positions where waiting requests leave this one's prompt */
    int32_t n_snap_hints;
    bool admitted_once;
    bool prompt_done_sent;
    uint64_t admit_order;    /* preemption takes the newest */
    float *scratch_logits;   /* [n_vocab] for the hook, allocated on first use */
    int32_t draft_k;         /* tokens to draft next: doubles while drafts are taken whole, else falls to
                              * the number taken (at least 1) */
    float draft_accept;      /* chance that a drafted token is taken, given the one before it was: an
                              * average over its verified drafts, recent ones weighing most */

    /* [mu] waiting list and what /v1/status shows */
    cv_sched_req *next;
    req_phase phase;
    int32_t st_cached;       /* prompt tokens from the cache (first admission) */
    int32_t st_done;         /* positions computed */
    int32_t st_gen;
    int32_t st_computed;     /* tokens this request prefilled, recompute included */
    uint64_t t_first_token;  /* ns, 0 before */
    uint64_t t_last_token;

    /* [r.mu] the event queue: evs[head..n_evs) unread */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    cv_sched_event *evs;
    int32_t n_evs, head, cap_evs;
    bool final_read;
};

struct cv_sched {
    cv_engine *e;            /* [engine] after create */
    int32_t n_vocab;
    int32_t queue_max;
    int32_t batch_tokens;
    int32_t batch_cap;       /* tokens a step may hold: batch_tokens, plus split_align for a prefill
                              * chunk that runs on to the split grid (within the engine's n_batch) */
    int32_t max_running;     /* min(n_seq_max, batch_tokens) */
    bool prefix_cache;
    cv_mem_info mem;         /* the engine's memory layout (its counts as of create) */
    int32_t snap_every;      /* a snapshot every this many positions of a prompt; 0: none (no recurrent state) */
    int32_t snap_unit;       /* snapshot positions are multiples of this */
    char *cache_path;        /* NULL: no cache file */
    int64_t cache_max_bytes;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;     /* the engine thread waits here for work */
    bool quit;               /* [mu] */
    cv_rng seeds;            /* [mu] */
    uint64_t next_id;        /* [mu] */
    cv_sched_req *q_head, *q_tail; /* [mu] waiting, oldest first (preempted ones go back to the front) */
    int32_t q_len;           /* [mu] */
    cv_sched_req **running;  /* [max_running] written by the engine thread under mu; read under mu */
    int32_t n_running;
    cv_sched_stats st;       /* [mu] counters (running/waiting/kv filled on read) */

    /* [engine] */
    radix tree;
    uint64_t admit_counter;
    int32_t *b_tok, *b_seq, *b_pos; /* [batch_cap] the step's batch */
    bool *b_want;
    bool b_hidden;           /* an embedding request is in the batch: keep the hidden states */
    cv_sched_req **b_req;    /* [max_running] requests in the batch, in batch order */
    int32_t *b_n;            /* [max_running] their token counts */
    int32_t *b_draft;        /* [max_running] of those, drafted tokens (after the one known token) */
    int32_t draft_max;       /* tokens drafted per sequence and step at most; 0: no speculation */
    cv_sched_share *share;   /* NULL: the engine's threads are its own */
    bool shared;             /* [engine] among the share's busy schedulers */
    int32_t n_logits;        /* logit rows per forward call (the engine's limit) */
    /* What decode steps cost (running averages from the engine's profile;
     * 0: not measured yet): the part that does not grow with context
     * (weights, sampling), and attention seconds per position a row of the
     * step attends. */
    double step_base, att_per_pos;
    rx_node **path;          /* [n_ctx / CV_KV_BLOCK + 1] scratch for lookups */
    const cv_mem_span **spans; /* [n_ctx / CV_KV_BLOCK + 1] the path's spans */
    cv_sched_stats eng;      /* the counters the engine thread keeps (published into st) */
};

/* draft.c: the k_max tokens that followed the latest earlier occurrence
 * of the longest suffix of tokens[0..n) (CV_SCHED_DRAFT_NGRAM_MIN..MAX
 * tokens) into out, continued periodically past the end; returns k_max,
 * or 0 when there is no match. */
int32_t cv_sched_draft(const int32_t *tokens, int32_t n, int32_t k_max, int32_t *out);
/* draft.c: how many of k_max drafted tokens are worth verifying when each
 * costs draft_s seconds to verify, is taken (given the one before it was)
 * with chance accept, and saves a step of step_s seconds when it is. k_max
 * while the costs are unknown (step_s <= 0). */
int32_t cv_sched_draft_worth(double draft_s, double step_s, float accept, int32_t k_max);

/* sched.c */
void cv_sched_push_event(cv_sched_req *r, const cv_sched_event *ev);
void cv_sched_req_unref(cv_sched_req *r);
/* sched_step.c */
void *cv_sched_engine_main(void *arg);
/* Ends a request that never ran (DONE, canceled) and drops the scheduler's
 * reference. */
void cv_sched_finish_waiting(cv_sched_req *r);

/* ---- the cache file (cache_file.c) ---- */

/* Loads path into t (blocks drawn from t's engine): 0 with *n_loaded, or a
 * negative code with err saying why the file was refused (the tree is then
 * left empty). CV_ENOTFOUND when there is no file. */
int cv_sched_cache_load(radix *t, const char *path, int32_t max_blocks, int64_t *n_loaded, cv_err *err);
/* Writes t to path atomically (temp file + rename), most recently used
 * nodes first, at most max_bytes; an empty tree writes nothing. */
int cv_sched_cache_save(radix *t, const char *path, int64_t max_bytes, int64_t *n_saved, cv_err *err);

#endif

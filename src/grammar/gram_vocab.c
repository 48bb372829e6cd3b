/* gram_vocab.c — the grammar's view of a model vocabulary, built from the
 * tokenizer layer: every id's bytes as the streaming detokenizer would emit
 * them, and which ids are special or end generation. Kept apart from the
 * trie code (gram_mask.c) so that the rest of the layer needs no tokenizer. */
#include <stdlib.h>

#include "grammar/grammar_int.h"
#include "tokenizer/tokenizer.h"

int cv_grammar_vocab_from_tok(const cv_tok *t, cv_grammar_vocab **out, cv_err *err)
{
    *out = NULL;
    int32_t n = cv_tok_n_vocab(t);
    if (n <= 0 || (uint32_t)n > CV_MAX_GRAMMAR_VOCAB)
        return cv_err_set(err, CV_ELIMIT, "grammar: vocabulary of %d tokens, must be in [1, %u]", n,
                          CV_MAX_GRAMMAR_VOCAB);
    cv_buf all = { 0 };
    size_t *off = cv_xmalloc(((size_t)n + 1) * sizeof *off);
    uint8_t *flags = cv_xcalloc((size_t)n, 1);
    int rc = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = all.len;
        if ((rc = cv_tok_piece(t, i, 0, &all, err)))
            goto done;
        if (cv_tok_is_eog(t, i))
            flags[i] = CV_GRAMMAR_TOK_EOG;
        else if (cv_tok_is_special(t, i))
            flags[i] = CV_GRAMMAR_TOK_SPECIAL;
    }
    off[n] = all.len;
    cv_str *pieces = cv_xmalloc((size_t)n * sizeof *pieces);
    for (int32_t i = 0; i < n; i++)
        pieces[i] = (cv_str){ all.data ? all.data + off[i] : "", off[i + 1] - off[i] };
    rc = cv_grammar_vocab_create(n, pieces, flags, out, err);
    free(pieces);
done:
    free(off);
    free(flags);
    cv_buf_free(&all);
    return rc;
}

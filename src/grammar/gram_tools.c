#include "grammar/grammar_int.h"
int cv_grammar_from_tools(const cv_grammar_tools_opts *o, cv_grammar **out, cv_err *err) { (void)o; *out=NULL; return cv_err_set(err, CV_EUNSUPPORTED, "todo"); }

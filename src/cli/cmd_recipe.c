/* cmd_recipe.c — `corvid recipe CLIENT`: prints the exact set-up that points
 * an agent client or SDK at a corvid server, from the same table `corvid
 * launch` applies (clients.c): environment variables with why each matters,
 * the command line, and the persistent config file for those who prefer one.
 * With no CLIENT it lists the clients. Values are shell-quoted so the lines
 * can be pasted into a shell. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/models.h"

/* Single-quoted for sh when the value needs it. */
static void shell_quote(const char *v, cv_buf *b)
{
    bool plain = *v != 0;
    for (const char *p = v; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+%", *p) != NULL;
    if (plain) {
        cv_buf_puts(b, v);
        return;
    }
    cv_buf_putc(b, '\'');
    for (; *v; v++) {
        if (*v == '\'')
            cv_buf_puts(b, "'\\''");
        else
            cv_buf_putc(b, *v);
    }
    cv_buf_putc(b, '\'');
}

static void print_setup(const cv_client *c, const cv_client_params *p)
{
    cv_client_setup s = { 0 };
    c->setup(p, &s);
    printf("# %s -> corvid at http://%s:%d, model \"%s\" (corvid answers to any model name)\n", c->title, p->host,
           p->port, p->model);
    printf("# install: %s\n\n", c->install);
    for (int i = 0; i < s.n_unset; i++)
        printf("unset %s\n", s.unset[i]);
    for (int i = 0; i < s.n_env; i++) {
        cv_buf b = { 0 };
        shell_quote(s.env_value[i], &b);
        if (s.env_note[i])
            printf("export %s=%s    # %s\n", s.env_name[i], b.data, s.env_note[i]);
        else
            printf("export %s=%s\n", s.env_name[i], b.data);
        cv_buf_free(&b);
    }
    if (c->exe) {
        cv_buf cmd = { 0 };
        cv_buf_puts(&cmd, c->exe);
        for (int i = 0; i < s.n_args; i++) {
            cv_buf_putc(&cmd, ' ');
            shell_quote(s.args[i], &cmd);
        }
        printf("\n%s\n", cmd.data);
        printf("# or, headless: %s%s\n", s.n_args ? "the same flags with " : "", c->run_hint);
        cv_buf_free(&cmd);
    } else {
        printf("\n# then run your program: %s\n", c->run_hint);
    }
    if (s.file_path) {
        if (!strcmp(s.file_path, "code"))
            printf("\n# in code:\n%s", s.file_body);
        else
            printf("\n# or, persistently, %s:\n%s", s.file_path, s.file_body);
    }
    if (c->notes) {
        printf("\n# notes:\n");
        for (const char *l = c->notes; *l;) {
            size_t len = strcspn(l, "\n");
            printf("#   %.*s\n", (int)len, l);
            l += len;
            l += *l == '\n';
        }
    }
    printf("\n# corvid launch %s [MODEL] does all of this (starting corvid serve if needed).\n", c->name);
    cv_client_setup_fini(&s);
}

#define P(field) offsetof(cv_client_params, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--host", NULL, CV_FLAG_STR, P(host), 0, 0, "H", "the server's address (default 127.0.0.1)"),
    CV_FLAG_ROW("--port", NULL, CV_FLAG_I32, P(port), 1, 65535, "N", "the server's port (default 8000)"),
    CV_FLAG_ROW("--model", NULL, CV_FLAG_STR, P(model), 0, 0, "NAME", "the served model name (default corvid)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, P(api_key), 0, 0, "KEY",
      "the server's key (default: env CORVID_API_KEY)"),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I64, P(n_ctx), 256, 1 << 24, "N",
      "the served context, for clients that size prompts"),

};
#undef P
static const cv_cli_spec spec = {
    .name = "recipe", .args = "[CLIENT]", .max_args = 1, .flags = flags, .n_flags = CV_ARRAY_LEN(flags),
    .notes = "CLIENT: claude-code, codex, opencode, qwen-code, aider, openai-sdk, anthropic-sdk (none: the list)."
};

int cv_cmd_recipe(int argc, char **argv)
{
    cv_client_params p = { .host = "127.0.0.1", .port = 8000, .model = "corvid", .api_key = getenv("CORVID_API_KEY") };
    int n, st;
    if (!cv_cli_parse(&spec, &p, argc, argv, &n, &st))
        return st;
    const char *client = n ? argv[1] : NULL;
    if (!strcmp(p.host, "0.0.0.0") || !strcmp(p.host, "::"))
        p.host = "127.0.0.1"; /* a server bound to every address is reached on loopback */
    if (!client) {
        printf("clients (corvid recipe CLIENT):\n");
        for (int i = 0; i < cv_n_clients; i++)
            printf("  %-14s %s\n", cv_clients[i].name, cv_clients[i].title);
        return 0;
    }
    const cv_client *c = cv_client_find(client);
    if (!c) {
        fprintf(stderr, "corvid recipe: no client '%s'; known:", client);
        for (int i = 0; i < cv_n_clients; i++)
            fprintf(stderr, " %s", cv_clients[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    print_setup(c, &p);
    return 0;
}

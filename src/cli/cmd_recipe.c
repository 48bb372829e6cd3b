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

static int parse_port(const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < 1 || x > 65535)
        return -1;
    *out = (int)x;
    return 0;
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

int cv_cmd_recipe(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("recipe");
    cv_client_params p = { .host = "127.0.0.1", .port = 8000, .model = "corvid", .api_key = getenv("CORVID_API_KEY") };
    const char *client = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\n\nusage: %s\n", cmd->summary, cmd->usage);
            return 0;
        }
        if (a[0] != '-') {
            if (client)
                return cv_cli_usage_error(cmd, "one CLIENT only (got '%s' and '%s')", client, a);
            client = a;
            continue;
        }
        if (i + 1 >= argc)
            return cv_cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--host")) p.host = v;
        else if (!strcmp(a, "--port")) {
            if (parse_port(v, &p.port))
                return cv_cli_usage_error(cmd, "--port '%s' must be 1..65535", v);
        } else if (!strcmp(a, "--model")) p.model = v;
        else if (!strcmp(a, "--api-key")) p.api_key = v;
        else if (!strcmp(a, "--ctx")) {
            char *end;
            long long x = strtoll(v, &end, 10);
            if (*end || end == v || x < 256 || x > (1LL << 24))
                return cv_cli_usage_error(cmd, "--ctx '%s' must be 256..16777216", v);
            p.n_ctx = x;
        } else
            return cv_cli_usage_error(cmd, "unknown flag '%s'", a);
    }
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

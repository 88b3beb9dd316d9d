/* The .hx grammar: a file is a list of blocks `keyword "name"... { fields }`,
 * a field is `name = value`, fields end at ';' or a newline (the scanner only
 * reports newlines inside braces). Block keywords are plain identifiers so
 * that `gpu` can be both a block and a node's field; new_block() checks them.
 *
 * Syntax errors are worded by report_syntax_error() from what the parser
 * expected at that point ("expected '=' after field name 'layers'"), never
 * bison's own text, and recovery resumes at the next separator, at the end of
 * the block, or at the next block, so one run reports every error. */
%define api.pure full
%define api.prefix {hx_yy}
%define parse.error custom
/* Exact expected-token sets at an error (no default reductions hiding them):
 * the messages are built from those sets. */
%define parse.lac full
%define lr.default-reduction accepting
%locations
%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {struct hx_parse_state *ps}

%code requires {
#include "grammar/parse_state.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
struct hx_vlist {
  struct hx_value value;
  struct hx_vlist *next;
};
struct hx_field_list {
  struct hx_field *first, *last;
};
struct hx_names {
  int count;
  const char *name[2];
  struct location loc[2];
};
}

%union {
  struct hx_value value;
  const char *str;
  struct hx_field *field;
  struct hx_field_list fields;
  struct hx_vlist *vlist;
  struct hx_block *block;
  struct hx_names names;
}

%code {
#include <string.h>

#include "ir/diag.h"

int hx_yylex(HX_YYSTYPE *lval, HX_YYLTYPE *lloc, yyscan_t scanner);
static int lex_and_remember(HX_YYSTYPE *lval, HX_YYLTYPE *lloc, yyscan_t scanner,
                            struct hx_parse_state *ps);
#undef yylex
#define yylex(lval, lloc, scanner) lex_and_remember(lval, lloc, scanner, ps)

static struct location loc_of(const struct hx_parse_state *ps, const HX_YYLTYPE *l) {
  return hx_loc_at(ps, l->first_line, l->first_column);
}
static struct hx_block *new_block(struct hx_parse_state *ps, const char *keyword,
                                  const HX_YYLTYPE *kloc, const struct hx_names *names);
static void finish_block(struct hx_parse_state *ps, struct hx_block *b, struct hx_field_list items,
                         struct hx_field *last);
static struct hx_field *new_field(struct hx_parse_state *ps, const char *name, const HX_YYLTYPE *l,
                                  struct hx_value value);
static struct hx_field_list append_field(struct hx_field_list list, struct hx_field *f);
static struct hx_value make_list(struct hx_parse_state *ps, const HX_YYLTYPE *l, struct hx_vlist *rev);
static struct hx_value make_text(struct hx_parse_state *ps, enum hx_value_kind kind, const char *text,
                                 const HX_YYLTYPE *l);
static void hx_yyerror(const HX_YYLTYPE *l, yyscan_t scanner, struct hx_parse_state *ps, const char *msg);
}

%token <str> IDENT "identifier"
%token <str> STRING "string"
%token <value> NUMBER "number"
%token NL "newline"

%type <value> value
%type <vlist> list_items
%type <field> field last
%type <fields> items
%type <names> names
%type <block> block_open
%type <str> keyword field_name

%%
file:
    %empty
  | file block
  | file NL                             /* after a stray '}' the scanner may see depth > 0 */
  | file error                          /* skip tokens until a block can start */
  ;

block:
    block_open items last '}'           { finish_block(ps, $1, $2, $3); }
  | block_open items error '}'          { finish_block(ps, $1, $2, NULL); yyerrok; }
  | keyword names error '}'             { ps->block_keyword = NULL; yyerrok; }
  ;

block_open:
    keyword names '{'                   { $$ = new_block(ps, $1, &@1, &$2);
                                          ps->open_brace = loc_of(ps, &@3); }
  ;

keyword:
    IDENT                               { $$ = $1; ps->block_keyword = $1; ps->last_field = NULL; }
  ;

names:
    %empty                              { memset(&$$, 0, sizeof $$); }
  | names STRING                        { $$ = $1;
                                          if ($$.count < 2) {
                                            $$.name[$$.count] = $2;
                                            $$.loc[$$.count] = loc_of(ps, &@2);
                                          }
                                          $$.count++; }
  ;

items:
    %empty                              { $$.first = $$.last = NULL; }
  | items sep                           { $$ = $1; }
  | items field sep                     { $$ = append_field($1, $2); }
  | items error sep                     { $$ = $1; yyerrok; }
  ;

last:
    %empty                              { $$ = NULL; }
  | field                               { $$ = $1; }
  ;

sep: ';' | NL ;

field:
    field_name '=' value                { $$ = new_field(ps, $1, &@1, $3); }
  ;

field_name:
    IDENT                               { $$ = $1; ps->last_field = $1; }
  ;

value:
    NUMBER                              { $$ = $1; }
  | STRING                              { $$ = make_text(ps, HX_V_STRING, $1, &@1); }
  | IDENT                               { $$ = make_text(ps, HX_V_IDENT, $1, &@1); }
  | '[' ']'                             { $$ = make_list(ps, &@1, NULL); }
  | '[' list_items ']'                  { $$ = make_list(ps, &@1, $2); }
  | '[' list_items ',' ']'              { $$ = make_list(ps, &@1, $2); }
  | '[' error ']'                       { $$ = make_list(ps, &@1, NULL); }
  ;

list_items:
    value                               { $$ = HX_NEW(ps->arena, struct hx_vlist); $$->value = $1; }
  | list_items ',' value                { $$ = HX_NEW(ps->arena, struct hx_vlist);
                                          $$->value = $3; $$->next = $1; }
  ;
%%

static int keyword_index(const char *word) {
  for (int i = 0; i < HX_B_COUNT; i++)
    if (!strcmp(word, hx_block_keywords[i]))
      return i;
  return -1;
}

/* How many names each block kind takes. */
static const int names_wanted[HX_B_COUNT] = {
    [HX_B_MODEL] = 1, [HX_B_GPU] = 1, [HX_B_NODE] = 1, [HX_B_LINK] = 2, [HX_B_PROFILE] = 1,
    [HX_B_EMULATION] = 0,
};

static void report_names(const char *keyword, struct location kloc, const struct hx_names *names, int wanted) {
  struct location where = names->count > wanted ? names->loc[wanted < 2 ? wanted : 1] : kloc;
  if (wanted == 0)
    hx_error(where, "'%s' block takes no name", keyword);
  else if (wanted == 1)
    hx_error(where, "'%s' block needs exactly one name: %s \"name\" { ... }", keyword, keyword);
  else
    hx_error(where, "'%s' block needs two node names: %s \"a\" \"b\" { ... }", keyword, keyword);
}

static struct hx_block *new_block(struct hx_parse_state *ps, const char *keyword,
                                  const HX_YYLTYPE *kloc, const struct hx_names *names) {
  struct location where = loc_of(ps, kloc);
  int k = keyword_index(keyword);
  if (k < 0) {
    hx_error(where, "unknown block '%s'", hx_short_text(ps->arena, keyword));
    const char *near = hx_nearest_name(keyword, hx_block_keywords, HX_B_COUNT);
    if (near)
      hx_note(where, "did you mean '%s'?", near);
    else
      hx_note(where, "blocks are model, train, gpu, node, link, network, profile, emulation and planner");
    return NULL;
  }
  if (names->count != names_wanted[k]) {
    report_names(keyword, where, names, names_wanted[k]);
    return NULL;
  }
  struct hx_block *b = HX_NEW(ps->arena, struct hx_block);
  b->kind = (enum hx_block_kind)k;
  b->loc = where;
  if (names->count > 0) {
    b->name = names->name[0];
    b->name_loc = names->loc[0];
  }
  if (names->count > 1) {
    b->name2 = names->name[1];
    b->name2_loc = names->loc[1];
  }
  return b;
}

static void finish_block(struct hx_parse_state *ps, struct hx_block *b, struct hx_field_list items,
                         struct hx_field *last) {
  ps->block_keyword = NULL;
  ps->last_field = NULL;
  if (!b) /* reported in new_block */
    return;
  if (last)
    items = append_field(items, last);
  b->fields = items.first;
  if (ps->ast->last)
    ps->ast->last->next = b;
  else
    ps->ast->first = b;
  ps->ast->last = b;
}

static struct hx_field *new_field(struct hx_parse_state *ps, const char *name, const HX_YYLTYPE *l,
                                  struct hx_value value) {
  struct hx_field *f = HX_NEW(ps->arena, struct hx_field);
  f->name = name;
  f->loc = loc_of(ps, l);
  f->value = value;
  return f;
}

static struct hx_field_list append_field(struct hx_field_list list, struct hx_field *f) {
  if (list.last)
    list.last->next = f;
  else
    list.first = f;
  list.last = f;
  return list;
}

static struct hx_value make_text(struct hx_parse_state *ps, enum hx_value_kind kind, const char *text,
                                 const HX_YYLTYPE *l) {
  struct hx_value v;
  memset(&v, 0, sizeof v);
  v.kind = kind;
  v.text = text;
  v.loc = loc_of(ps, l);
  return v;
}

/* rev holds the items last first (left recursion builds it cheaply). */
static struct hx_value make_list(struct hx_parse_state *ps, const HX_YYLTYPE *l, struct hx_vlist *rev) {
  struct hx_value v = make_text(ps, HX_V_LIST, NULL, l);
  int n = 0;
  for (struct hx_vlist *i = rev; i; i = i->next)
    n++;
  v.items = HX_NEW_ARRAY(ps->arena, struct hx_value, n);
  v.nitems = n;
  for (struct hx_vlist *i = rev; i; i = i->next)
    v.items[--n] = i->value;
  return v;
}

/* The scanner, plus what messages need: the end-of-file position (flex does
 * not set a location for it) and a stop once too many errors were reported. */
static int lex_and_remember(HX_YYSTYPE *lval, HX_YYLTYPE *lloc, yyscan_t scanner,
                            struct hx_parse_state *ps) {
  int token = hx_too_many_errors() ? 0 : hx_yylex(lval, lloc, scanner);
  if (token == 0) {
    lloc->first_line = lloc->last_line = ps->line;
    lloc->first_column = lloc->last_column = ps->col;
  }
  ps->prev_token_text = ps->last_token_text;
  ps->last_token_text = token == IDENT || token == STRING ? lval->str : NULL;
  return token;
}

static const char *describe_token(const struct hx_parse_state *ps, yysymbol_kind_t t) {
  switch (t) {
  case YYSYMBOL_YYEOF:
    return "end of file";
  case YYSYMBOL_NL:
    return "end of line";
  case YYSYMBOL_NUMBER:
    return "a number";
  case YYSYMBOL_STRING:
    return hx_sprintf(ps->arena, "string \"%s\"", hx_short_text(ps->arena, ps->last_token_text));
  case YYSYMBOL_IDENT:
    return hx_sprintf(ps->arena, "'%s'", hx_short_text(ps->arena, ps->last_token_text));
  default:
    return yysymbol_name(t);
  }
}

struct expected {
  bool eq, value, sep, rbrace, lbrace, name, ident, comma, rbracket, eof;
};

static struct expected expected_tokens(const yypcontext_t *yyctx) {
  yysymbol_kind_t kinds[YYNTOKENS];
  int n = yypcontext_expected_tokens(yyctx, kinds, YYNTOKENS);
  struct expected e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < n; i++) {
    switch (kinds[i]) {
    case YYSYMBOL_YYEOF: e.eof = true; break;
    case YYSYMBOL_IDENT: e.ident = true; break;
    case YYSYMBOL_STRING: e.name = true; break;
    case YYSYMBOL_NUMBER: e.value = true; break;
    case YYSYMBOL_NL: e.sep = true; break;
    default: {
      const char *s = yysymbol_name(kinds[i]);
      e.eq |= !strcmp(s, "'='");
      e.sep |= !strcmp(s, "';'");
      e.rbrace |= !strcmp(s, "'}'");
      e.lbrace |= !strcmp(s, "'{'");
      e.comma |= !strcmp(s, "','");
      e.rbracket |= !strcmp(s, "']'");
    }
    }
  }
  return e;
}

/* The field and block being parsed, for messages ("?" when not known). */
static const char *field_or_unknown(const struct hx_parse_state *ps) {
  return ps->last_field ? hx_short_text(ps->arena, ps->last_field) : "?";
}
static const char *block_or_unknown(const struct hx_parse_state *ps) {
  return ps->block_keyword ? hx_short_text(ps->arena, ps->block_keyword) : "?";
}

static void unclosed_block(const struct hx_parse_state *ps, struct location at, const char *found) {
  hx_error(at, "expected '}' to end the '%s' block, found %s", block_or_unknown(ps), found);
  hx_note(ps->open_brace, "to match this '{'");
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, yyscan_t scanner, struct hx_parse_state *ps) {
  (void)scanner;
  struct location at = loc_of(ps, yypcontext_location(yyctx));
  yysymbol_kind_t t = yypcontext_token(yyctx);
  const char *found = describe_token(ps, t);
  struct expected e = expected_tokens(yyctx);
  bool at_eof = t == YYSYMBOL_YYEOF;
  if (e.eq) {
    /* The field name is the token before the lookahead (its rule is not
     * reduced yet). `train {` inside an unclosed block reads as a field. */
    const char *name = ps->prev_token_text ? ps->prev_token_text : "?";
    bool next_block = keyword_index(name) >= 0 && (t == YYSYMBOL_STRING || !strcmp(yysymbol_name(t), "'{'"));
    if (next_block)
      unclosed_block(ps, at, hx_sprintf(ps->arena, "the '%s' block", name));
    else
      hx_error(at, "expected '=' after field name '%s', found %s", hx_short_text(ps->arena, name), found);
  } else if (e.comma || e.rbracket) {
    hx_error(at, "expected ',' or ']' in the list of '%s', found %s", field_or_unknown(ps), found);
  } else if (e.value) {
    hx_error(at, "expected a value after '=' in field '%s', found %s", field_or_unknown(ps), found);
  } else if (at_eof && ps->block_keyword && e.rbrace) {
    unclosed_block(ps, at, found);
  } else if (e.sep && e.rbrace) {
    hx_error(at, "expected ';' or a newline after the value of '%s', found %s", field_or_unknown(ps),
             found);
  } else if (e.rbrace && e.ident) {
    hx_error(at, "expected a field name or '}' in the '%s' block, found %s", block_or_unknown(ps), found);
  } else if (e.lbrace) {
    hx_error(at, "expected a name in double quotes or '{' after '%s', found %s", block_or_unknown(ps), found);
  } else {
    hx_error(at, "expected a block such as 'model \"name\" {', found %s", found);
  }
  return 0;
}

/* Bison's only own message left: its stack overflowing ("memory exhausted"),
 * which deeply nested lists ([[[[...) can cause. */
static void hx_yyerror(const HX_YYLTYPE *l, yyscan_t scanner, struct hx_parse_state *ps, const char *msg) {
  (void)scanner;
  hx_error(loc_of(ps, l), "input nested too deeply (%s)", msg);
}

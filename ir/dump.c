/* placeholder: replaced by its owner */
#include "../passes/passes.h"
void hx_dump_ast(const struct hx_ctx *ctx, FILE *f) { (void)ctx; (void)f; }
void hx_dump_model(const struct hx_ctx *ctx, FILE *f) { (void)ctx; (void)f; }
void hx_dump_cluster(const struct hx_ctx *ctx, FILE *f) { (void)ctx; (void)f; }

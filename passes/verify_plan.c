/* placeholder: replaced by its owner */
#include "../passes/passes.h"
void hx_verify_plan(const struct hx_ctx *ctx, const struct hx_plan *p) { (void)ctx; (void)p; }

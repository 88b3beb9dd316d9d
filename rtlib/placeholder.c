typedef int hx_placeholder_unused;

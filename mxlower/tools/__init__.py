"""mxlower's command-line tools: ``mxlower-opt`` and friends."""

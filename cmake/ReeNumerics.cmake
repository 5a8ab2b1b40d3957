# Numerics flags for every target (docs/repops-spec.md, section "Compilation").
# Host: no contraction of a*b+c into fma behind our back, no fast-math, IEEE semantics.
# Device: no fmad contraction, IEEE division and square root, denormals kept.
# These are global on purpose: a reproducible path must not depend on which target it is in.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C,CXX>:-ffp-contract=off;-fno-fast-math>"
  "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false;-prec-div=true;-prec-sqrt=true;-ftz=false>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-ffp-contract=off,-fno-fast-math,-Wall,-Wextra>"
  "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")

# bench/zero_variant.sh — sourced by the step simulator's benchmarks (bench/simulate.sh,
# bench/simulate_bandwidth.sh): one name per ZeRO variant they run, and its DeepSpeed-style config.
#   s0 s1 s2 s3  the stages at DeepSpeed's defaults
#   s2off        stage 2, the optimizer offloaded to the host
#   s3off        stage 3, the optimizer and the parameters offloaded to the host
#   qwZ hpZ qgZ  stage 3 with one of ZeRO++'s parts (hpZ: the secondary over a node's ranks)
#   all          stage 3 with all three (hpZ only where a node holds 2 ranks or more)
# zero_variant_config VARIANT RANKS_PER_NODE BATCH  prints the config; an unknown name fails.
zero_variant_config() {
  local v=$1 ranks=$2 batch=$3 stage=3 qw=false hpz=1 qg=false opt=none par=none
  case "$v" in
    s0|s1|s2|s3) stage=${v#s};;
    s2off) stage=2 opt=cpu;;
    s3off) opt=cpu par=cpu;;
    qwZ) qw=true;;
    hpZ) hpz=$ranks;;
    qgZ) qg=true;;
    all) qw=true qg=true; [ "$ranks" -gt 1 ] && hpz=$ranks;;
    *) echo "bench/zero_variant.sh: unknown variant $v (s0 s1 s2 s3 s2off s3off qwZ hpZ qgZ all)" >&2; return 2;;
  esac
  cat <<CFG
{"train_micro_batch_size_per_gpu": $batch,
 "zero_optimization": {"stage": $stage, "zero_quantized_weights": $qw, "zero_hpz_partition_size": $hpz,
                       "zero_quantized_gradients": $qg,
                       "offload_optimizer": {"device": "$opt"}, "offload_param": {"device": "$par"}}}
CFG
}

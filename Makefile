# dattn — build, test, install.
#
#   make                  build/libdattn.so, build/libdattn.a (+ CUDA objects when nvcc
#                         is found and src/cuda has sources; CUDA=0 turns that off)
#   make test             C test suite (CPU; CUDA tests skip without a GPU)
#   make asan             the test suite under AddressSanitizer + UBSan (build-asan/)
#   make valgrind         the test suite under valgrind memcheck (quick sweep)
#   make install PREFIX=/usr/local   headers, libraries, pkg-config file
#   make BUILD=dir ...    build somewhere else (several trees side by side)
#
# Files named *_avx512.c / *_avx2.c get the matching -m flags; the library chooses among
# them at run time, so one build runs on any x86-64 CPU (and elsewhere the portable
# code is used).

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
NVCC     ?= nvcc
CUDA     ?= auto
OPT      ?= -O3
SAN      ?=

VERSION  := $(shell sed -n 's/^\#define DATTN_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/dattn.h | paste -sd.)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unknown-pragmas
CFLAGS_ALL := -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -fopenmp -D_GNU_SOURCE \
              -Iinclude $(WARN) $(SAN) $(CFLAGS)
LDLIBS_ALL := -fopenmp -lm $(SAN) $(LDLIBS)

ARCH     := $(shell uname -m)
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
ISA_avx2   := -mavx2 -mfma -mf16c

LIB_SRCS := $(wildcard src/*.c src/cpu/*.c)
ifneq ($(ARCH),x86_64)
LIB_SRCS := $(filter-out %_avx512.c %_avx2.c,$(LIB_SRCS))
endif
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)

# ---- CUDA (optional) --------------------------------------------------------------
CU_SRCS := $(wildcard src/cuda/*.cu)
ifeq ($(CUDA),auto)
  ifneq ($(CU_SRCS),)
    ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
      CUDA := 1
    endif
  endif
endif
ifeq ($(CUDA),1)
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  # sm_80 class kernels for Ampere/Ada/Hopper + PTX for newer; Hopper-only files
  # (*_sm90.cu) are built for sm_90a alone.
  CUDA_ARCHS ?= -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=sm_86 \
                -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90a,code=sm_90a \
                -gencode=arch=compute_80,code=compute_80
  CUDA_ARCHS_SM90 ?= -gencode=arch=compute_90a,code=sm_90a
  NVFLAGS := -std=c++17 -O3 -g -lineinfo -Xcompiler -fPIC,-fvisibility=hidden -Iinclude \
             -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage,-Werror \
             --expt-relaxed-constexpr -DDATTN_WITH_CUDA $(NVCCFLAGS)
  CU_OBJS := $(CU_SRCS:%.cu=$(BUILD)/%.o)
  CFLAGS_ALL += -DDATTN_WITH_CUDA
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lpthread -lrt
else
  CU_OBJS :=
  CUDA_LIBS :=
endif

.PHONY: all lib test asan valgrind install clean tests-build demo check gpu-check
all: lib
lib: $(BUILD)/libdattn.so $(BUILD)/libdattn.a

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*.h src/cpu/*.h) | $(BUILD)/src/cpu
	$(CC) $(CFLAGS_ALL) $(if $(filter %_avx512.c,$<),$(ISA_avx512)) \
	  $(if $(filter %_avx2.c,$<),$(ISA_avx2)) $(if $(filter src/buckets.c,$<),-ffp-contract=off) \
	  -c $< -o $@

$(BUILD)/src/cuda/%_sm90.o: src/cuda/%_sm90.cu $(wildcard include/*.h src/*.h src/cuda/*.cuh src/cuda/*.def) | $(BUILD)/src/cuda
	$(NVCC) $(NVFLAGS) $(CUDA_ARCHS_SM90) -c $< -o $@

$(BUILD)/src/cuda/%.o: src/cuda/%.cu $(wildcard include/*.h src/*.h src/cuda/*.cuh src/cuda/*.def) | $(BUILD)/src/cuda
	$(NVCC) $(NVFLAGS) $(CUDA_ARCHS) -c $< -o $@

$(BUILD)/src/cpu $(BUILD)/src/cuda $(BUILD)/tests:
	mkdir -p $@

$(BUILD)/libdattn.so: $(LIB_OBJS) $(CU_OBJS)
	$(CC) -shared -Wl,-soname,libdattn.so.0 -o $@ $^ $(CUDA_LIBS) $(LDLIBS_ALL)

$(BUILD)/libdattn.a: $(LIB_OBJS) $(CU_OBJS)
	rm -f $@ && ar rcs $@ $^

# ---- tests -------------------------------------------------------------------------
# tests/test_*.c are programs; the other tests/*.c are shared support linked into each.
TEST_MAINS := $(wildcard tests/test_*.c)
TEST_SUPPORT := $(filter-out $(TEST_MAINS),$(wildcard tests/*.c))
TEST_SUPPORT_OBJS := $(TEST_SUPPORT:%.c=$(BUILD)/%.o)
TEST_BINS := $(TEST_MAINS:tests/%.c=$(BUILD)/tests/%)
TEST_CFLAGS := -Isrc -Itests $(if $(filter 1,$(CUDA)),-I$(CUDA_HOME)/include)

$(BUILD)/tests/%.o: tests/%.c $(wildcard include/*.h src/*.h tests/*.h) | $(BUILD)/tests
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_SUPPORT_OBJS) $(BUILD)/libdattn.a
	$(CC) -o $@ $^ $(CUDA_LIBS) $(LDLIBS_ALL)

# tests/test_*.cu: GPU unit tests built by nvcc for sm_90a alone (CUDA=1 only; they exit 77
# without a matching GPU).
ifeq ($(CUDA),1)
CU_TEST_BINS := $(patsubst tests/%.cu,$(BUILD)/tests/%,$(wildcard tests/test_*.cu))
$(CU_TEST_BINS): $(BUILD)/tests/%: tests/%.cu $(wildcard src/cuda/*.cuh tests/*.h) | $(BUILD)/tests
	$(NVCC) $(NVFLAGS) $(CUDA_ARCHS_SM90) -Itests -o $@ $<
TEST_BINS += $(CU_TEST_BINS)
# bench/proto_*.cu: kernel prototypes (bench only, not in the library), built with the tests so
# that they keep compiling; run by scripts/gpu_check.sh (--check) and by hand (--bench)
PROTO_BINS := $(patsubst bench/%.cu,$(BUILD)/bench/%,$(wildcard bench/proto_*.cu))
$(PROTO_BINS): $(BUILD)/bench/%: bench/%.cu $(wildcard src/cuda/*.cuh tests/*.h) | $(BUILD)/bench
	$(NVCC) $(NVFLAGS) $(CUDA_ARCHS_SM90) -Isrc/cuda -Itests -o $@ $<
$(BUILD)/bench:
	mkdir -p $@
endif

tests-build: $(TEST_BINS) $(PROTO_BINS)

# TEST_ARGS is passed to every test program (e.g. TEST_ARGS="--quick --seed 42").
TEST_ARGS ?=
TEST_WRAP ?=
test: tests-build
	@sh tests/run.sh "$(TEST_WRAP)" "$(TEST_ARGS)" $(TEST_BINS)

# The sanitizer and valgrind runs use the --quick sweep (every family, mode, dtype and
# mask pattern, fewer lengths): the full sweep under ASan takes ~8 minutes on 2 cores.
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 CUDA=0 TEST_ARGS="--quick" \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

valgrind:
	$(MAKE) BUILD=build-vg OPT="-O2" CUDA=0 tests-build
	$(MAKE) BUILD=build-vg OPT="-O2" CUDA=0 TEST_ARGS="--quick" \
	  TEST_WRAP="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect" test

# ---- the README's two commands ------------------------------------------------------
# make demo:  the C demo (v3-base attention on the CPU vs the float64 reference), then
#             the Python demo (a DeBERTa-v3-base-shaped model, dattn vs transformers) in .venv
# make check: everything CI runs (scripts/check.sh)
$(BUILD)/demo: examples/demo.c $(BUILD)/tests/ref64.o $(BUILD)/libdattn.a
	$(CC) $(CFLAGS_ALL) -Itests -o $@ $^ $(CUDA_LIBS) $(LDLIBS_ALL)

demo: $(BUILD)/demo
	$(BUILD)/demo
	sh scripts/pyenv.sh
	.venv/bin/python -m dattn demo

check:
	sh scripts/check.sh

# GPU runner (on a machine with a GPU, e.g. through the device tool): builds, runs the
# CUDA tests, compute-sanitizer, pytest on CUDA and the benchmarks; logs and JSON go to
# $$OUT (default gpu-out/). GPU_CHECK_ARGS is passed to the script (e.g. --quick).
gpu-check:
	@sh scripts/gpu_check.sh $(GPU_CHECK_ARGS)

# ---- install -----------------------------------------------------------------------
install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/dattn.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/libdattn.so $(DESTDIR)$(PREFIX)/lib/libdattn.so.$(VERSION)
	ln -sf libdattn.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libdattn.so.0
	ln -sf libdattn.so.0 $(DESTDIR)$(PREFIX)/lib/libdattn.so
	install -m 644 $(BUILD)/libdattn.a $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	  -e 's|@LIBS_PRIVATE@|-fopenmp -lm $(CUDA_LIBS)|' dattn.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/dattn.pc

clean:
	rm -rf $(BUILD) build-asan build-vg

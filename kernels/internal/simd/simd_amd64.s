//go:build amd64 && !purego

#include "textflag.h"

// func addLanesAVX512(x *float32, n int, acc *[16]float64)
// acc[j mod 16] += float64(x[j]) for j < n (n a multiple of 16): lanes
// 0–7 in Z0, 8–15 in Z1.
TEXT ·addLanesAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ acc+16(FP), DI
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	SHRQ $4, CX
addlanes_loop:
	VCVTPS2PD (SI), Z2
	VCVTPS2PD 32(SI), Z3
	VADDPD Z2, Z0, Z0
	VADDPD Z3, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ addlanes_loop
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VZEROUPPER
	RET

// func addSqDevLanesAVX512(x *float32, n int, mean float64, acc *[16]float64)
// acc[j mod 16] += (float64(x[j]) - mean)² for j < n (n a multiple of 16).
TEXT ·addSqDevLanesAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD mean+16(FP), Z4
	MOVQ acc+24(FP), DI
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	SHRQ $4, CX
sqdev_loop:
	VCVTPS2PD (SI), Z2
	VCVTPS2PD 32(SI), Z3
	VSUBPD Z4, Z2, Z2
	VSUBPD Z4, Z3, Z3
	VMULPD Z2, Z2, Z2
	VMULPD Z3, Z3, Z3
	VADDPD Z2, Z0, Z0
	VADDPD Z3, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ sqdev_loop
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VZEROUPPER
	RET

// func scaleShiftAVX512(y, x *float32, n int, a, b float32)
// y[j] = x[j]·a + b for j < n (n a multiple of 16), multiply then add.
TEXT ·scaleShiftAVX512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Z1
	VBROADCASTSS b+28(FP), Z2
	SHRQ $4, CX
scale_loop:
	VMULPS (SI), Z1, Z0
	VADDPS Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ scale_loop
	VZEROUPPER
	RET

// func reluAVX512(y, x *float32, n int)
// y[j] = max(x[j], 0) for j < n (n a multiple of 16): VMAXPS with x as
// its second operand returns x when x is NaN and when x is ±0; adding
// +0 then turns -0 into +0 and changes nothing else.
TEXT ·reluAVX512(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VPXORD Z1, Z1, Z1
	SHRQ $4, CX
relu_loop:
	VMOVUPS (SI), Z0
	VMAXPS Z0, Z1, Z0
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ relu_loop
	VZEROUPPER
	RET

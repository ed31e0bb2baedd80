/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clone3.S -- long wpp_clone3(struct clone_args *args, size_t size,
 *                             int (*fn)(void *), void *arg)
 * Creates a thread with clone3 (which, unlike clone, can ask for a given
 * thread id) and runs fn(arg) on the stack the arguments name; the thread
 * exits when fn returns. Returns the new thread's id, or -errno. fn and arg
 * travel to the child in r12 and r13, which clone copies.
 */
	.text
	.globl wpp_clone3
	.hidden wpp_clone3
	.type wpp_clone3, @function
wpp_clone3:
	push %r12
	push %r13
	mov %rdx, %r12
	mov %rcx, %r13
	mov $435, %eax /* SYS_clone3 */
	syscall
	test %rax, %rax
	jz 1f
	pop %r13
	pop %r12
	ret
1:	xor %ebp, %ebp
	mov %r13, %rdi
	call *%r12
	mov %eax, %edi
	mov $60, %eax /* SYS_exit */
	syscall
	hlt
	.size wpp_clone3, .-wpp_clone3
	.section .note.GNU-stack,"",@progbits

OPENQASM 2.0;
include "qelib1.inc";
// the Bell state psi- = (|01> - |10>)/sqrt(2), kets written q[1]q[0]
qreg q[2];
h q[0];
x q[1];
cx q[0],q[1];
z q[0];

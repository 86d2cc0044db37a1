"""Host URIs for the allowlist tests: ones that could make libvirt run a program (or read a
file, or reach past the drivers Corral supports), each with a phrase its refusal must hold,
and the URIs people really write, which must keep working."""

# URI -> a phrase of the reason it is refused.
REFUSED = {
    # Transports and parameters that name a program.
    "qemu+ext:///system?command=/tmp/corral-marker.sh": "'ext' transport runs a program",
    "qemu+ssh://kvm1.example.org/system?command=/tmp/corral-marker.sh": "'command' names a",
    "qemu+ssh://kvm1.example.org/system?COMMAND=/tmp/corral-marker.sh": "'COMMAND' names a",
    "qemu+ssh://kvm1.example.org/system?netcat=/tmp/corral-marker.sh": "'netcat' names a",
    "qemu+ssh://kvm1.example.org/system?proxy=netcat": "'proxy' chooses a program",
    # libvirt decodes escapes and splits the query at ';' too: both could hide 'command'.
    "qemu+ssh://kvm1.example.org/system?%63ommand=/tmp/corral-marker.sh": "'%' escapes",
    "qemu+unix:///system?socket=/run/x;command=/tmp/corral-marker.sh": "absolute path of",
    # Parameters not on the list, repeated, or with values outside their shape.
    "qemu+ssh://kvm1.example.org/system?authfile=/etc/x": "Unknown libvirt URI parameter",
    "qemu+ssh://kvm1.example.org/system?tls_priority=NORMAL": "Unknown libvirt URI parameter",
    "qemu+ssh://kvm1.example.org/system?keyfile=/a&keyfile=/b": "given more than once",
    "qemu+ssh://kvm1.example.org/system?keyfile=-oProxyCommand=x": "absolute path of",
    "qemu+ssh://kvm1.example.org/system?no_verify=yes": "is 0 or 1",
    "qemu+ssh://kvm1.example.org/system?sshauth=agent,gssapi": "comma-separated list",
    "qemu+ssh://kvm1.example.org/system?mode=sideways": "auto, legacy or direct",
    "qemu+ssh://kvm1.example.org/system?name=qemu+ext:///system": "the URI the host's daemon",
    "qemu+ssh://kvm1.example.org/system?socket=/run/x/sock": "names a socket on this machine",
    "qemu+ssh://kvm1.example.org/system#fragment": "takes no fragment",
    # User and host names ssh would read as options, or holding shell characters.
    "qemu+ssh://-oProxyCommand=x@kvm1.example.org/system": "starts with '-'",
    "qemu+ssh://root@-oProxyCommand=x/system": "starts with '-'",
    "qemu+ssh://ro`id`ot@kvm1.example.org/system": "may hold only letters, digits",
    "qemu+ssh://root@kvm1$(id).example.org/system": "is not a DNS name",
    "qemu+ssh://root@kvm1;id/system": "is not a DNS name",
    # A file the test driver would read; QEMU run inside Corral; drivers Corral does not use.
    "test:///etc/corral/domains.xml": "names a file the test driver would read",
    "qemu:///embed?root=/tmp/qemu": "runs QEMU inside the Corral process",
    "lxc:///system": "Corral does not open 'lxc' URIs",
    "xen:///system": "Corral does not open 'xen' URIs",
    "vbox:///session": "Corral does not open 'vbox' URIs",
    "esx://esx1.example.org/?no_verify=1": "Corral does not open 'esx' URIs",
}

ACCEPTED = [
    "qemu:///system",
    "qemu+ssh://root@h/system?keyfile=/root/.ssh/id_ed25519",
    "qemu+tls://h.example.org/system",
    "qemu+unix:///session?socket=/run/x/libvirt-sock",
    "test+unix:///default?socket=/tmp/corral-sim-1a_b/sim-1/run/libvirt/libvirt-sock",
    "qemu+ssh://u@[2001:db8::1]:2222/system?known_hosts=/etc/x&no_verify=1",
    "qemu+ssh://corral@kvm1.example.org/system?no_tty=1&sshauth=agent,privkey",
    "qemu+libssh2://corral@10.0.0.7:2222/system?known_hosts=/srv/corral/known_hosts",
    "qemu+tcp://kvm1.example.org:16509/system?name=qemu:///system",
    "qemu+tls://kvm1.example.org/system?pkipath=/etc/corral/pki&mode=direct",
]

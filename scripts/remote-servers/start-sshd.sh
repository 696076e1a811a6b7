#!/bin/bash
# Start a throwaway OpenSSH sshd (SFTP) on 127.0.0.1:$PORT. Run as root.
set -euo pipefail
PORT=${PORT:-2222}
DIR=${DIR:-$(mktemp -d /tmp/sshd-test.XXXXXX)}
USER_NAME=${USER_NAME:-sftptest}
USER_PASS=${USER_PASS:-sftppass}
mkdir -p "$DIR/home" /run/sshd
chmod 755 "$DIR"
id -u "$USER_NAME" >/dev/null 2>&1 || useradd -M -d "$DIR/home" -s /usr/sbin/nologin "$USER_NAME"
usermod -d "$DIR/home" "$USER_NAME" 2>/dev/null || true
echo "$USER_NAME:$USER_PASS" | chpasswd
chown "$USER_NAME:" "$DIR/home"
[ -f "$DIR/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$DIR/host_ed25519"
[ -f "$DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$DIR/client_ed25519"
cp "$DIR/client_ed25519.pub" "$DIR/authorized_keys"
cat > "$DIR/sshd_config" <<CFG
ListenAddress 127.0.0.1
Port $PORT
HostKey $DIR/host_ed25519
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin no
PasswordAuthentication yes
PubkeyAuthentication yes
KbdInteractiveAuthentication no
AllowUsers $USER_NAME
Subsystem sftp internal-sftp
ForceCommand internal-sftp
AllowTcpForwarding no
X11Forwarding no
LogLevel INFO
CFG
/usr/sbin/sshd -t -f "$DIR/sshd_config"
# -D: no daemonize, -e: log to stderr; backgrounded by this script
/usr/sbin/sshd -D -e -f "$DIR/sshd_config" < /dev/null > /dev/null 2> "$DIR/sshd.log" &
echo $! > "$DIR/sshd.pid.bg"
for i in $(seq 1 100); do
  if ssh-keyscan -p "$PORT" 127.0.0.1 >/dev/null 2>&1; then echo "sshd ready on 127.0.0.1:$PORT dir=$DIR pid=$(cat $DIR/sshd.pid.bg)"; exit 0; fi
  sleep 0.1
done
echo "sshd failed to start"; cat "$DIR/sshd.log"; exit 1

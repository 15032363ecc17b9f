'use strict';
// Drive the pure-JavaScript ali-ons producer (npm ali-ons@3.12.0) once against a NameServer.
// Run by tests/test_clients_js.py: `node ons_producer.js NAMESRV_ADDR TOPIC BODY`.
// Prints one JSON line, {"ok":true,"sendStatus":...,"msgId":...,"brokerName":...,"queueId":...}
// or {"ok":false,"name":...,"code":...,"message":...}, and exits 0 either way; exits 3 when
// ali-ons is not installed (npm ci in tests/clients). Only 127.0.0.1 is used: clientIP is pinned,
// else ali-ons reports the machine's external address as its client id.

let Producer;
let Message;
try {
  ({ Producer, Message } = require('ali-ons'));
} catch (err) {
  process.stderr.write(`cannot load ali-ons (npm ci in tests/clients): ${err.message}\n`);
  process.exit(3);
}

const [ nameSrv, topic, body ] = process.argv.slice(2);

// ali-ons logs through options.logger; keep stdout for the one result line.
const logger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) { console.error('[ali-ons error]', ...args); },
};

function emit(result) {
  process.stdout.write(JSON.stringify(result) + '\n');
}

async function main() {
  const producer = new Producer({
    httpclient: {}, // required by ali-ons, unused with nameSrv
    nameSrv,
    producerGroup: 'PID-rocketpy-js',
    clientIP: '127.0.0.1',
    responseTimeout: 3000,
    logger,
  });
  producer.on('error', err => console.error('[ali-ons error event]', err.message));
  await producer.ready();
  let result;
  try {
    const sent = await producer.send(new Message(topic, 'rocketpy-tag', body));
    result = {
      ok: true,
      sendStatus: sent.sendStatus,
      msgId: sent.msgId,
      brokerName: sent.messageQueue.brokerName,
      queueId: sent.messageQueue.queueId,
      queueOffset: sent.queueOffset,
    };
  } catch (err) {
    result = { ok: false, name: err.name, code: err.code, message: err.message };
  }
  emit(result);
  await producer.close();
}

main().then(() => process.exit(0), err => {
  emit({ ok: false, name: err.name, code: err.code, message: String(err && err.stack || err) });
  process.exit(0);
});

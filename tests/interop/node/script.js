// One scripted session of node-zookeeper-client against the server named in argv[2]: one JSON
// line per step (its error code, or what it returned), for tests/interop/test_node_client.py to
// compare between zkpy and Apache ZooKeeper. Nothing that differs by run is printed (session
// ids, zxids, times).
'use strict';
const zookeeper = require('node-zookeeper-client');

const client = zookeeper.createClient(process.argv[2], { sessionTimeout: 10000, retries: 0 });

function say(step, error, value) {
  const code = error ? (typeof error.getCode === 'function' ? error.getCode() : String(error)) : 0;
  console.log(JSON.stringify({ step, code, value: value === undefined ? null : value }));
}

function stat(s) {
  if (!s) return null;
  const owner = s.ephemeralOwner.some((b) => b !== 0);
  return { version: s.version, cversion: s.cversion, aversion: s.aversion, dataLength: s.dataLength,
           numChildren: s.numChildren, ephemeral: owner };
}

function call(fn, ...args) {
  return new Promise((resolve) => fn.call(client, ...args, (...results) => resolve(results)));
}

async function main() {
  let [e, p] = await call(client.create, '/nz', Buffer.from('v0'), zookeeper.ACL.OPEN_ACL_UNSAFE,
                          zookeeper.CreateMode.PERSISTENT);
  say('create', e, p);
  [e, p] = await call(client.create, '/nz', Buffer.from('again'));
  say('create existing', e, p);
  [e, p] = await call(client.create, '/nz/seq-', Buffer.from('s'), zookeeper.ACL.OPEN_ACL_UNSAFE,
                      zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL);
  say('create ephemeral sequential', e, p);
  [e, p] = await call(client.create, '/nz/seq-', Buffer.from('s'), zookeeper.ACL.OPEN_ACL_UNSAFE,
                      zookeeper.CreateMode.PERSISTENT_SEQUENTIAL);
  say('create persistent sequential', e, p);
  const event = new Promise((resolve) => {
    client.getData('/nz', (ev) => resolve(ev), (err, data, s) => say('getData with a watch', err,
      { data: data ? data.toString() : null, stat: stat(s) }));
  });
  let [err, s] = await call(client.setData, '/nz', Buffer.from('v1'), 0);
  say('setData version 0', err, stat(s));
  const ev = await event;
  say('watch event', null, { type: ev.getType(), path: ev.getPath() });
  [err, s] = await call(client.setData, '/nz', Buffer.from('v2'), 0);
  say('setData stale version', err, stat(s));
  let [err2, children] = await call(client.getChildren, '/nz');
  say('getChildren', err2, children ? children.sort() : null);
  [err, s] = await call(client.exists, '/nz/none');
  say('exists missing', err, stat(s));
  [err] = await call(client.remove, '/nz', -1);
  say('remove non-empty', err);
  const [te, results] = await new Promise((resolve) => client.transaction()
    .create('/nz/t1', Buffer.from('t'))
    .check('/nz', 99)
    .commit((...r) => resolve(r)));
  say('transaction with a failing check', te, results ? results.map((r) => ({ type: r.type, err: r.err })) : null);
  [err, s] = await call(client.exists, '/nz/t1');
  say('exists after the failed transaction', err, stat(s));
  const [oe, oresults] = await new Promise((resolve) => client.transaction()
    .create('/nz/t1', Buffer.from('t'))
    .setData('/nz', Buffer.from('v3'), 1)
    .remove('/nz/t1', 0)
    .commit((...r) => resolve(r)));
  say('transaction', oe, oresults ? oresults.map((r) => ({ type: r.type, err: r.err })) : null);
  [err, s] = await call(client.exists, '/nz');
  say('exists', err, stat(s));
  [err2, children] = await call(client.getChildren, '/');
  say('root children', err2, children ? children.sort() : null);
  client.close();
}

client.once('connected', () => {
  main().catch((error) => { console.log(JSON.stringify({ step: 'crash', code: String(error) })); client.close(); });
});
client.connect();

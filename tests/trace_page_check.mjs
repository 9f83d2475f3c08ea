// Checks a page of scripts/trace_page.py in a real browser (tests/cli/test_trace_page.sh runs it):
// headless Chromium driven by puppeteer-core (npm, pinned in scripts/install-deps.sh).
//
//   node tests/trace_page_check.mjs --page P.html --trace T.json --ranks 4 --shot S.png [--step N]
//
// The page must open offline: every request the page makes is intercepted, and any request but
// the page's own file:// URL is recorded, failed, and fails this check. It proves its watcher
// live by making one request of its own (which must be seen). Then, against the trace itself:
// one lane group per rank, memory lanes labelled with their categories, as many spans drawn as
// the trace has "X" events in the range, a hover on a known collective showing its name and its
// bytes, a hover on a memory lane showing a sample's bytes, the draw under 1000 ms, and a
// screenshot. Exit 0: all passed; 1: a check failed; 77: Chromium cannot start here (skip).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const fail = (msg) => { console.log("FAIL: " + msg); process.exit(1); };
for (const k of ["page", "trace", "ranks", "shot", "npm"]) if (!opt[k]) fail(`missing --${k}`);

let puppeteer;
try {
  puppeteer = createRequire(path.join(path.resolve(opt.npm), "node_modules") + "/")("puppeteer-core");
} catch (e) {
  fail(`no puppeteer-core in ${opt.npm} (scripts/install-deps.sh installs it): ${e.message}`);
}

// ---- What the page must show, from the trace (the same window as trace_page.py's).
const events = JSON.parse(fs.readFileSync(opt.trace, "utf8")).traceEvents.filter((e) => "XiC".includes(e.ph));
let lo, hi;
if (opt.step) {
  const steps = events.filter((e) => e.ph === "X" && e.name === `step ${opt.step}`);
  lo = Math.min(...steps.map((e) => e.ts)); hi = Math.max(...steps.map((e) => e.ts + e.dur));
} else {
  lo = Math.min(...events.map((e) => e.ts)); hi = Math.max(...events.map((e) => e.ts + (e.dur || 0)));
}
const spans = events.filter((e) => e.ph === "X" && lo <= e.ts && e.ts <= hi);
const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

// ---- The browser. --no-sandbox: Chromium's sandbox cannot start as root in a container (CI
// runs as root); the page is our own file, opened with every network request refused.
const chromium = process.env.ZT_CHROMIUM || "/usr/bin/chromium";
let browser;
try {
  browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                     args: ["--no-sandbox", "--disable-gpu", "--no-first-run"] });
} catch (e) {
  console.log(`SKIP: Chromium (${chromium}) cannot start here: ${e.message.split("\n")[0]}`);
  process.exit(77);
}
try {
  await check(browser);
} finally {
  await browser.close();
}

async function check(browser) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const url = pathToFileURL(path.resolve(opt.page)).href;
  // Offline: the page's own file may load; every other request is recorded and failed.
  const requests = [];
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    if (req.url() === url) return req.continue();
    requests.push(req.url());
    return req.abort("internetdisconnected");
  });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url, { waitUntil: "load" });
  const z = await page.evaluate(() => window.ztPage && JSON.parse(JSON.stringify(window.ztPage)));
  if (requests.length) fail(`the page made ${requests.length} request(s) beyond its file: ${requests.join(", ")}`);
  if (errors.length) fail(`the page reported errors: ${errors.join(" | ")}`);
  if (!z) fail("the page did not set window.ztPage (its script did not run)");
  // The watcher is live: a request the page's context makes is seen (and refused).
  const fetched = await page.evaluate(() => fetch("http://example.invalid/probe").then(() => "loaded", () => "refused"));
  if (fetched !== "refused" || !requests.includes("http://example.invalid/probe"))
    fail(`the request watcher missed a probe request (${fetched}; seen: ${requests})`);
  console.log(`ok: offline: the page loaded from ${path.basename(opt.page)} with no other request (a probe request was seen and refused)`);

  // One lane group per rank; in each, the compute and comm tracks and memory lanes with labels.
  const want = Number(opt.ranks);
  const groups = [...new Set(z.lanes.map((l) => l.rank))];
  if (z.ranks !== want || groups.length !== want) fail(`${z.ranks} ranks, lane groups ${groups}; expected ${want}`);
  for (const r of groups) {
    const lanes = z.lanes.filter((l) => l.rank === r);
    for (const name of ["compute", "comm"])
      if (!lanes.some((l) => l.kind === "track" && l.labels.includes(name))) fail(`rank ${r}: no '${name}' track`);
    const mem = lanes.filter((l) => l.kind === "memory");
    if (!mem.length) fail(`rank ${r}: no memory lane`);
    for (const l of mem) {
      if (!l.categories.includes("params")) fail(`rank ${r} memory ${l.name}: categories ${l.categories}`);
      for (const c of l.categories)
        if (!l.labels.some((t) => t.endsWith(" " + c))) fail(`rank ${r} memory ${l.name}: '${c}' not labelled (${l.labels})`);
    }
  }
  const mem0 = z.lanes.filter((l) => l.rank === groups[0] && l.kind === "memory");
  console.log(`ok: ${want} lane groups; rank ${groups[0]}'s memory lanes: ${mem0.map((l) => `${l.name} (${l.categories.join(", ")})`).join("; ")}`);

  // Every span of the range drawn.
  if (z.spans !== spans.length || z.spansDrawn !== spans.length)
    fail(`the page holds ${z.spans} spans and drew ${z.spansDrawn}; the trace has ${spans.length} X events in the range`);
  console.log(`ok: ${z.spansDrawn} spans drawn, the trace's X events in ${opt.step ? "step " + opt.step : "the whole run"}`);

  // Hover on a collective: rank 1's longest, where no other collective of rank 1 runs.
  const box = await page.evaluate(() => { const b = document.getElementById("canvas").getBoundingClientRect(); return [b.left, b.top]; });
  const r1 = groups[Math.min(1, groups.length - 1)];
  const comm = spans.filter((e) => e.pid === r1 && e.tid === 1);
  const alone = comm.filter((a) => !comm.some((b) => b !== a && b.ts < a.ts + a.dur && a.ts < b.ts + b.dur))
    .sort((a, b) => b.dur - a.dur)[0];
  if (!alone) fail(`rank ${r1}: no collective to hover`);
  const lane = z.lanes.find((l) => l.rank === r1 && l.kind === "track" && l.labels.includes("comm"));
  const x = await page.evaluate((t) => window.ztPage.xOf(t), alone.ts - lo + alone.dur / 2);
  await page.mouse.move(box[0] + x, box[1] + lane.y + 7);  // the middle of the lane's first row
  const tip = await page.$eval("#tip", (t) => (t.style.display === "block" ? t.textContent : ""));
  if (!tip.includes(alone.name) || !tip.includes(grouped(alone.args.bytes) + " bytes"))
    fail(`hover on '${alone.name}' (${alone.args.bytes} bytes) of rank ${r1} at x ${x.toFixed(1)} shows: '${tip}'`);
  console.log(`ok: hover on rank ${r1}'s '${alone.name}' shows: ${tip.split("\n").slice(1).join(" | ")}`);

  // Hover on a memory lane: rank 0's first tier, just after a sample that holds for 3+ pixels.
  const m = mem0[0];
  const samples = events.filter((e) => e.ph === "C" && e.pid === groups[0] && e.name === "memory: " + m.name && lo <= e.ts && e.ts <= hi)
    .sort((a, b) => a.ts - b.ts);
  const xs = await page.evaluate((ts) => ts.map((t) => window.ztPage.xOf(t)), samples.map((s) => s.ts - lo));
  const k = xs.findIndex((xk, i) => i >= xs.length / 2 && i + 1 < xs.length && xs[i + 1] - xk > 3);
  if (k < 0) fail(`no memory sample of rank ${groups[0]} stands 3 pixels apart to hover`);
  await page.mouse.move(box[0] + xs[k] + 1, box[1] + m.y + m.h / 2);
  const mtip = await page.$eval("#tip", (t) => (t.style.display === "block" ? t.textContent : ""));
  const params = samples[k].args.params;
  if (!new RegExp(`params +${grouped(params)} bytes`).test(mtip))
    fail(`hover on rank ${groups[0]}'s memory at sample ${k} (params ${params}) shows: '${mtip}'`);
  console.log(`ok: hover on rank ${groups[0]}'s ${m.name} memory shows params ${grouped(params)} bytes at that sample`);

  // The draw's time, measured by the page around its own draw (performance.now()).
  if (!(z.firstDrawMs >= 0 && z.firstDrawMs < 1000)) fail(`drawing took ${z.firstDrawMs} ms (limit 1000)`);
  console.log(`ok: drawn in ${z.firstDrawMs.toFixed(1)} ms (${spans.length} spans, ${want} ranks)`);

  await page.mouse.move(0, 0);
  await page.screenshot({ path: opt.shot, fullPage: true });
  const size = fs.statSync(opt.shot).size;
  if (size < 20000) fail(`the screenshot ${opt.shot} is only ${size} bytes`);
  console.log(`ok: screenshot ${path.basename(opt.shot)}, ${size} bytes`);
}

// The lease page's interactive charts. The server renders every chart as an SVG (readable
// without JavaScript) and embeds its data next to it with Django's json_script
// (portal.charts.chart_data): series, contract and threshold steps, the unit and labels,
// already translated. This script replaces each such SVG with an Apache ECharts chart:
// values with their unit on hover, zoom and range selection, legend entries that toggle
// their line, steps where the terms changed and gaps where nothing was measured.
//
// Incidents are shaded bands behind the lines (the data's "bands", from the server), named
// in the tooltip. Charts of the same range (the lease page's shared time picker gives the
// throughput and bus bandwidth charts the same x_min and x_max) move together: a
// crosshair follows the mouse on each of them at once, and zooming one zooms the others.
//
// `make assets` bundles this file with only the ECharts parts it imports (esbuild, tree
// shaken) into portal/static/portal/vendor/charts.min.js.
import * as echarts from "echarts/core";
import { LineChart } from "echarts/charts";
import {
  DataZoomInsideComponent,
  DataZoomSliderComponent,
  GridComponent,
  LegendScrollComponent,
  MarkAreaComponent,
  TooltipComponent,
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([
  LineChart,
  GridComponent,
  TooltipComponent,
  LegendScrollComponent,
  MarkAreaComponent,
  DataZoomInsideComponent,
  DataZoomSliderComponent,
  CanvasRenderer,
]);

const TEXT = "#333333"; // 12.6:1 on white
const BAND = "rgba(198, 40, 40, 0.12)"; // portal.charts.BAND_FILL at BAND_OPACITY

function formats(language, zone) {
  const number = new Intl.NumberFormat(language, { maximumFractionDigits: 2 });
  const day = new Intl.DateTimeFormat(language, {
    timeZone: zone,
    month: "2-digit",
    day: "2-digit",
  });
  const instant = new Intl.DateTimeFormat(language, {
    timeZone: zone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  });
  return {
    value: (y) => number.format(y),
    day: (ms) => day.format(new Date(ms)),
    instant: (ms) => instant.format(new Date(ms)),
  };
}

function bandsAt(data, ms) {
  return (data.bands || []).filter((band) => band.from <= ms && ms <= band.to);
}

function bandSeries(data) {
  const bands = data.bands || [];
  if (!bands.length) return [];
  return [
    {
      name: data.bands_label || "incidents",
      type: "line",
      data: [],
      color: "#c62828",
      markArea: {
        silent: true,
        itemStyle: { color: BAND },
        data: bands.map((band) => [{ xAxis: band.from }, { xAxis: band.to }]),
      },
      z: 1,
    },
  ];
}

function option(data, format) {
  const unit = data.unit;
  return {
    animation: false,
    textStyle: { color: TEXT },
    grid: { left: 8, right: 16, top: 56, bottom: 64, containLabel: true },
    legend: {
      type: "scroll",
      top: 0,
      left: 0,
      right: 0,
      textStyle: { color: TEXT },
      pageTextStyle: { color: TEXT },
    },
    tooltip: {
      trigger: "axis",
      confine: true,
      axisPointer: { type: "line" },
      // DOM nodes, not an HTML string: ECharts' own markers carry style="" attributes, which
      // the Content-Security-Policy refuses (style-src 'self'); a marker's colour is set
      // through the style object instead, and names are text nodes, never parsed as HTML.
      formatter: (params) => {
        const rows = params.filter(
          (p) => p.value && p.value[1] !== null && p.value[1] !== undefined,
        );
        const at = params.length ? params[0].axisValue : null;
        const bands = at === null ? [] : bandsAt(data, at);
        if (!rows.length && !bands.length) return "";
        const box = document.createElement("div");
        box.append(format.instant(rows.length ? rows[0].value[0] : at));
        bands.forEach((band) => {
          const line = document.createElement("b");
          line.className = "echart-incident";
          line.textContent = band.name;
          box.append(document.createElement("br"), line);
        });
        rows.forEach((p) => {
          const marker = document.createElement("span");
          marker.className = "echart-marker";
          marker.style.backgroundColor = p.color;
          const figure = document.createElement("b");
          figure.textContent = `${format.value(p.value[1])} ${unit}`;
          box.append(document.createElement("br"), marker, `${p.seriesName}: `, figure);
        });
        return box;
      },
    },
    xAxis: {
      type: "time",
      min: data.x_min,
      max: data.x_max,
      axisLabel: { color: TEXT, hideOverlap: true, formatter: (ms) => format.day(ms) },
    },
    yAxis: {
      type: "value",
      scale: !data.from_zero,
      min: data.from_zero ? 0 : undefined,
      name: unit,
      nameTextStyle: { color: TEXT, align: "left" },
      axisLabel: { color: TEXT, formatter: (y) => format.value(y) },
    },
    dataZoom: [
      { type: "inside", filterMode: "none" },
      { type: "slider", filterMode: "none", height: 24, bottom: 8, labelFormatter: (ms) => format.day(ms) },
    ],
    series: bandSeries(data).concat(data.series.map((one) => ({
      name: one.name,
      type: "line",
      data: one.points,
      step: one.step ? "end" : false,
      showSymbol: false,
      connectNulls: false,
      symbol: "circle",
      symbolSize: 4,
      color: one.colour,
      lineStyle: { width: one.step ? 2 : 1.5, type: one.dashed ? "dashed" : "solid" },
      emphasis: { focus: "none" },
      z: one.step ? 3 : 2,
    }))),
  };
}

function enhance(figure) {
  const source = document.getElementById(figure.dataset.chart);
  const svg = figure.querySelector("svg");
  if (!source || !svg) return null;
  const data = JSON.parse(source.textContent);
  const language = document.documentElement.lang || "en";
  const box = document.createElement("div");
  box.className = "echart";
  box.setAttribute("role", "img");
  box.setAttribute("aria-label", data.title);
  box.style.width = "100%";
  box.style.height = window.innerWidth < 600 ? "300px" : "340px";
  svg.style.display = "none";
  figure.insertBefore(box, svg);
  const chart = echarts.init(box, null, { renderer: "canvas" });
  chart.setOption(option(data, formats(language, data.zone)));
  figure.classList.add("interactive");
  figure.echart = chart; // for the browser tests and the console
  return chart;
}

// The crosshair across a group: the mouse's time on one chart shows the tooltip and the
// axis pointer at the same time on every other (each converts the time to its own pixels,
// as their y axes differ in width); leaving the chart hides them all.
function crosshair(charts) {
  charts.forEach((chart) => {
    const zr = chart.getZr();
    zr.on("mousemove", (event) => {
      const point = [event.offsetX, event.offsetY];
      if (!chart.containPixel({ gridIndex: 0 }, point)) return;
      const ms = chart.convertFromPixel({ xAxisIndex: 0 }, event.offsetX);
      charts.forEach((other) => {
        if (other === chart) return;
        const x = other.convertToPixel({ xAxisIndex: 0 }, ms);
        other.dispatchAction({ type: "showTip", x, y: other.getHeight() / 2 });
      });
    });
    zr.on("globalout", () =>
      charts.forEach((other) => other !== chart && other.dispatchAction({ type: "hideTip" })),
    );
  });
}

// Zooming one chart of a group zooms the others to the same times.
function zoomTogether(charts) {
  let moving = false;
  charts.forEach((chart) => {
    chart.on("datazoom", () => {
      if (moving) return;
      // The charts of a group span the same range (the server's x_min and x_max), so
      // the same share of it is the same times.
      const { start, end } = chart.getOption().dataZoom[0];
      moving = true;
      charts.forEach(
        (other) => other !== chart && other.dispatchAction({ type: "dataZoom", start, end }),
      );
      moving = false;
    });
  });
}

function start() {
  const made = [];
  const groups = {};
  document.querySelectorAll("figure[data-chart]").forEach((figure) => {
    try {
      const chart = enhance(figure);
      if (!chart) return;
      made.push(chart);
      const data = JSON.parse(document.getElementById(figure.dataset.chart).textContent);
      const group = `${data.x_min}-${data.x_max}`;
      (groups[group] = groups[group] || []).push(chart);
    } catch (error) {
      // The server's SVG stays where the interactive chart cannot be drawn.
      console.error(error);
    }
  });
  Object.values(groups).forEach((charts) => {
    if (charts.length < 2) return;
    crosshair(charts);
    zoomTogether(charts);
  });
  window.addEventListener("resize", () => made.forEach((chart) => chart.resize()));
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
